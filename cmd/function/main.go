// Command function serves the Tenant composition function over gRPC, as
// Crossplane's function runtime runs it: mutual TLS with the certificates
// in --tls-certs-dir (TLS_SERVER_CERTS_DIR), or --insecure for
// `crossplane composition render`.
package main

import (
	"flag"
	"fmt"
	"os"

	sdk "github.com/crossplane/function-sdk-go"

	"ddupan.top/provider-postgresql-tenant/internal/function"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "function:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("function", flag.ContinueOnError)
	network := fs.String("network", "tcp", "the network to listen on")
	address := fs.String("address", ":9443", "the address to listen on")
	certs := fs.String("tls-certs-dir", os.Getenv("TLS_SERVER_CERTS_DIR"), "the directory of tls.crt, tls.key and ca.crt (mutual TLS)")
	insecure := fs.Bool("insecure", false, "serve without TLS (crossplane composition render)")
	metrics := fs.String("metrics-address", ":8080", "the address of the Prometheus metrics endpoint")
	debug := fs.Bool("debug", false, "log one line per render (the Tenant's name, phases and what was composed)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := sdk.NewLogger(*debug)
	if err != nil {
		return err
	}
	return sdk.Serve(&function.Function{Log: log},
		sdk.Listen(*network, *address),
		sdk.MTLSCertificates(*certs),
		sdk.Insecure(*insecure),
		sdk.WithMetricsServer(*metrics))
}
