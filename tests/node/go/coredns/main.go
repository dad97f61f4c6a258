// Command coredns is CoreDNS with only the plugins the node tier's cluster DNS uses,
// built the way CoreDNS documents for a custom plugin set: import the plugins and
// list them, in order, in dnsserver.Directives.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

func init() {
	dnsserver.Directives = []string{"bind", "errors", "health", "ready", "cache", "kubernetes"}
}

func main() {
	coremain.Run()
}
