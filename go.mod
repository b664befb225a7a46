module github.com/fcap-io/fcap

go 1.26

require github.com/cespare/xxhash/v2 v2.3.0

require go.uber.org/goleak v1.3.0 // indirect
