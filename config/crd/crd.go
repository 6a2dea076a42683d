// Package crd contains the generated CustomResourceDefinition of LBRegistrar
// (bases/, made by controller-gen from api/), for the command-line tools to
// default manifests exactly as the API server does (package
// api/defaulting).
package crd

import _ "embed"

// LBRegistrars is bases/nodes.peppy-ratio.dev_lbregistrars.yaml.
//
//go:embed bases/nodes.peppy-ratio.dev_lbregistrars.yaml
var LBRegistrars []byte
