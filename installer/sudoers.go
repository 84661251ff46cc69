package installer

import (
	"fmt"
	"strings"

	"github.com/stewardrt/steward/systemd"
)

// SudoersFile is the sudoers drop-in, relative to the installation root.
// Its name has no '.' and no '~', so sudo's @includedir reads it.
const SudoersFile = "etc/sudoers.d/steward"

// renderSudoers writes the drop-in from the verb table: the operator account
// may run, as root and without a password, exactly the argument lists the
// table's sudo column names, and nothing else (install and uninstall have no
// sudo column, so they stay root's).
func renderSudoers(binDir string) []byte {
	bin := binDir + "/steward-installer"
	var cmnds []string
	for _, v := range verbTable() {
		for _, args := range v.sudo {
			cmnds = append(cmnds, bin+" "+args)
		}
	}
	var b strings.Builder
	b.WriteString("# Rendered by steward-installer. Do not edit it: `steward-installer install`\n")
	b.WriteString("# refuses to overwrite a file that differs.\n")
	fmt.Fprintf(&b, "# %s may run exactly these steward-installer verbs as root, and\n", systemd.OperatorUser)
	b.WriteString("# nothing else. A bare verb allows no further arguments; '*' allows any,\n")
	b.WriteString("# which steward-installer then parses strictly.\n")
	b.WriteString("Cmnd_Alias STEWARD_OPERATOR_VERBS = \\\n")
	for i, c := range cmnds {
		sep := ", \\\n"
		if i == len(cmnds)-1 {
			sep = "\n"
		}
		b.WriteString("\t" + c + sep)
	}
	fmt.Fprintf(&b, "%s ALL=(root) NOPASSWD: STEWARD_OPERATOR_VERBS\n", systemd.OperatorUser)
	return []byte(b.String())
}
