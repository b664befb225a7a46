package main

import "github.com/hashicorp/memberlist"

func wanConfig() *memberlist.Config { return memberlist.DefaultWANConfig() }
