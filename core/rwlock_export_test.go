package core

// RLockScriptSource is the source the Locker sends for a reader's script
// "acquire" or "release" (the shared functions spliced in).
func RLockScriptSource(name string) string {
	if name == "acquire" {
		return rlockAcquireScript.src
	}
	return rlockReleaseScript.src
}
