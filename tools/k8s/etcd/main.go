// Command etcd is etcd's own main (go install of etcd is refused: it has replace directives).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
