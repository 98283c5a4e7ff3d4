// vtcombo with vtgate's static auth plugin linked in, for scripts/vitess.sh.
//
// vttestserver runs $VTROOT/bin/vtcombo with `--mysql-auth-server-impl none` and has no
// way to pass other vtcombo flags, and stock vtcombo lacks the static auth flags. This
// binary is stock vtcombo plus those flags (as vtgate's own plugin_auth_static.go
// registers them), and it appends the flags in FERRY_VTCOMBO_FLAGS (split on spaces)
// after vttestserver's, so they win (the last value of a flag counts):
//
//	FERRY_VTCOMBO_FLAGS='--mysql-auth-server-impl static --mysql-auth-server-static-file F --allow-kill-statement'
package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	vtcombo "vitess.io/vitess/go/cmd/vtcombo/cli"
	"vitess.io/vitess/go/exit"
	"vitess.io/vitess/go/mysql"
	"vitess.io/vitess/go/vt/log"
	"vitess.io/vitess/go/vt/utils"
	"vitess.io/vitess/go/vt/vtgate"
)

func main() {
	defer exit.Recover()

	var file, json string
	var reload time.Duration
	fs := vtcombo.Main.Flags()
	fs.StringVar(&file, "mysql-auth-server-static-file", "", "JSON file to read the users/passwords from.")
	fs.StringVar(&json, "mysql-auth-server-static-string", "", "JSON representation of the users/passwords config.")
	fs.DurationVar(&reload, "mysql-auth-static-reload-interval", 0, "Ticker to reload credentials.")
	// Run when vtgate starts its MySQL listener, before it looks the auth server up.
	vtgate.RegisterPluginInitializer(func() { mysql.InitAuthServerStatic(file, json, reload) })

	args := append(os.Args[1:], strings.Fields(os.Getenv("FERRY_VTCOMBO_FLAGS"))...)
	vtcombo.Main.SetArgs(args)
	vtcombo.Main.SetGlobalNormalizationFunc(utils.NormalizeUnderscoresToDashes)
	if err := vtcombo.Main.Execute(); err != nil {
		log.Error(fmt.Sprint(err))
		exit.Return(1)
	}
}
