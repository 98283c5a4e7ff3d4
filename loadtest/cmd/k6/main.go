// Command k6 is stock k6 plus Ferry's own extensions (HTTP/3 + HTTP/2 psdb
// client, MySQL-over-TLS baseline). Built by ../../build-k6.sh into bin/k6.
package main

import (
	k6cmd "go.k6.io/k6/cmd"

	_ "ferry/loadtest/xk6/ferry"
	_ "ferry/loadtest/xk6/mysql"
)

func main() { k6cmd.Execute() }
