module github.com/fcap-io/fcap/scripts

go 1.26.0
