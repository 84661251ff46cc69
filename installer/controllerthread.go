package installer

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// asControllerThread runs fn as the controller's account while the rest of
// the process stays what it is: status must read root's files (the
// sudoers drop-in, the state directories' modes) and the controller's
// (its config, its bundle, and the forward sockets the bundle names), and
// the controller's must not be read as root. A path the controller's
// config names (its bundle) or the operator's signed bundle names (a
// forward socket) must not let root open or even stat a file the
// controller's account could not: that would be an oracle of root's files
// for the operator, who reaches status through sudo.
//
// fn runs on an OS thread of its own (runtime.LockOSThread) whose
// credentials alone are changed, by raw system calls (Linux credentials
// are per thread; the syscall package's Setresuid would change every
// thread): groups dropped, gid and uid set to the controller's, real,
// effective and saved, so the thread can never be root again. The thread
// is never unlocked, so when fn's goroutine ends the runtime ends the
// thread with it, and no other goroutine ever runs on it. Account "" (the
// tests' own account) runs fn on the calling goroutine.
func (e ControllerEnv) asControllerThread(fn func()) error {
	uid, gid, ok, err := e.controllerIDs()
	if err != nil {
		return err
	}
	if !ok {
		fn()
		return nil
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		if _, _, errno := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); errno != 0 {
			done <- fmt.Errorf("becoming %s on one thread: setgroups: %v", e.Account, errno)
			return
		}
		if _, _, errno := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); errno != 0 {
			done <- fmt.Errorf("becoming %s on one thread: setresgid %d: %v", e.Account, gid, errno)
			return
		}
		if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); errno != 0 {
			done <- fmt.Errorf("becoming %s on one thread: setresuid %d: %v", e.Account, uid, errno)
			return
		}
		fn()
		done <- nil
	}()
	return <-done
}
