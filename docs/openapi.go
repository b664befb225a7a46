// Package docs carries the one document a program serves: the JSON API's
// OpenAPI spec (openapi.yaml beside this file), which every node with
// the JSON API on serves at GET /openapi.yaml on its HTTP address.
// Embedding the file itself, not a copy, keeps what a node serves the
// spec the repository documents.
package docs

import _ "embed"

//go:embed openapi.yaml
var openAPI string

// OpenAPI returns docs/openapi.yaml.
func OpenAPI() string { return openAPI }
