//go:build generate

// Package apis holds the provider's API types. `make generate` runs the
// generators below (through hack/generate.sh); their output is checked in.
package apis
