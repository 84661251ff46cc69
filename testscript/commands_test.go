package testscript_test

// inProcess maps each steward command to its package's entry point, run by
// testscript.Main when this test binary is executed under that name. Every
// entry is the whole of the command's main: main only calls it.
func inProcess() map[string]func() {
	return map[string]func(){}
}
