// Command xpkgcheck lints what hack/build-package.sh built:
//
//	xpkgcheck -output DIR -platforms "linux/amd64 linux/arm64" \
//	  -crds package/crds -configuration package/configuration -license LICENSE
//
// checks that:
//
//   - LICENSE is the Apache License 2.0 text the packages declare;
//   - each platform's provider package,
//     DIR/provider-postgresql-tenant-linux-<arch>.xpkg, has a runtime image
//     for that platform (config os/architecture, entrypoint /provider, user
//     65532, a /provider binary for that architecture and the LICENSE,
//     labels naming the source and the license), a
//     package.yaml with the Provider metadata (safe-start, the metadata
//     annotations), every CRD of the CRD directory and nothing of the
//     Configuration, and an examples layer;
//   - each platform's composition function package,
//     DIR/function-postgresql-tenant-linux-<arch>.xpkg, likewise has a
//     runtime image for that platform (entrypoint /function), the Function
//     metadata and the schema of its input, and nothing of the Configuration;
//   - DIR/<package>.xpkg is this machine's platform's package of each, when
//     the platforms include it;
//   - with more than one platform, DIR/<package>.oci is an OCI image layout
//     whose index lists exactly those platforms, each entry being the
//     package built for it;
//   - DIR/configuration-postgresql-tenant.xpkg has the Configuration
//     metadata and annotations, its dependencies as the source declares them
//     (the provider and the function, each with a version range), every XRD
//     and Composition of the Configuration directory, and a Tenant example.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
)

func main() {
	var o options
	flag.StringVar(&o.output, "output", "_output", "directory holding the built packages")
	flag.StringVar(&o.platforms, "platforms", "linux/amd64 linux/arm64", "platforms built, space separated")
	flag.StringVar(&o.crds, "crds", "package/crds", "the provider's CRD directory")
	flag.StringVar(&o.configuration, "configuration", "package/configuration", "the Configuration's source directory")
	flag.StringVar(&o.license, "license", "LICENSE", "the license file")
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	o.host = "linux/" + runtime.GOARCH
	problems := run(o)
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, "xpkgcheck:", p)
		}
		os.Exit(1)
	}
	fmt.Printf("xpkgcheck: ok (%s; %s)\n", strings.Join(strings.Fields(o.platforms), ", "), o.output)
}
