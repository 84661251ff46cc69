// Command steward-installer runs as root, through sudo, and does only the
// fixed verbs of package installer's table; anything else is refused.
//
//	steward-installer install [--root DIR] [--bin-dir DIR]
//	steward-installer uninstall [--root DIR] [--purge]
//	steward-installer status [--root DIR] [--bin-dir DIR] [--json]
//	steward-installer bundle-install BUNDLE
//	steward-installer controller-tool REQUEST
//	steward-installer controller-tool-result ID
//	steward-installer controller-tool-ack ID
//	steward-installer controller-journal [--from SEQ]
//	steward-installer controller-enroll REQUEST
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/stewardrt/steward/installer"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := installer.Run(ctx, os.Args[1:], installer.EnvFromOS(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
