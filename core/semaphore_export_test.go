package core

// SemaphoreScriptSource is the source the Locker sends for a semaphore's
// script "acquire" or "release" (the queue's and the holders' functions
// spliced in).
func SemaphoreScriptSource(name string) string {
	if name == "acquire" {
		return semAcquireScript.src
	}
	return semReleaseScript.src
}
