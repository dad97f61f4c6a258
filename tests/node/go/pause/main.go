// Command pause is the node tier's pod sandbox process: it holds the pod's namespaces
// open and exits on SIGINT or SIGTERM, like the upstream pause container.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	<-signals
}
