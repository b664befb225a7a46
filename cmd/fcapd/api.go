package main

import (
	"github.com/fcap-io/fcap/client/httpapi"
	"github.com/fcap-io/fcap/node"
)

// startAPI is the node's JSON API: client/httpapi's gateway, which goes
// through a smart client of the cluster seeded with the node. The node
// starts it (node.Config.API) without importing the client.
func startAPI(env node.APIEnv) (node.API, error) {
	g, err := httpapi.Start(httpapi.Config(env))
	if err != nil {
		return nil, err // not a nil *Gateway in a non-nil node.API
	}
	return g, nil
}
