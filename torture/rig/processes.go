package rig

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// processes are the worker processes of a run: worker i runs as
// generation 0, and each kill starts generation g+1 in its place.
type processes struct {
	cfg  *RunConfig
	args func(i, gen int) []string // the worker's command-line flags

	mu      sync.Mutex
	procs   []*proc
	logs    []string // every worker log file, all generations
	stopped bool
}

type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	gen    int
}

// start launches generation gen of worker i (mu held).
func (p *processes) start(i, gen int) error {
	name := fmt.Sprintf("w%d.%d", i, gen)
	logPath := filepath.Join(p.cfg.Dir, name+".jsonl")
	out, err := os.Create(filepath.Join(p.cfg.Dir, name+".out"))
	if err != nil {
		return err
	}
	cmd := exec.Command(p.cfg.Bin, append([]string{"worker", "-name", name, "-log", logPath}, p.args(i, gen)...)...)
	cmd.Stdout, cmd.Stderr = out, out
	if p.cfg.Mutants != "" {
		cmd.Env = append(os.Environ(), "LOCKGATE_MUTANTS="+p.cfg.Mutants)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // gone with the controller
	if err := cmd.Start(); err != nil {
		out.Close()
		return err
	}
	pr := &proc{name: name, cmd: cmd, exited: make(chan struct{}), gen: gen}
	go func() {
		cmd.Wait()
		out.Close()
		close(pr.exited)
	}()
	for len(p.procs) <= i {
		p.procs = append(p.procs, nil)
	}
	p.procs[i] = pr
	p.logs = append(p.logs, logPath)
	return nil
}

// startAll launches generation 0 of every worker (and of the crowd, the
// last one, if the run has one).
func (p *processes) startAll() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.cfg.Workers
	if p.cfg.Crowd > 0 {
		n++
	}
	for i := 0; i < n; i++ {
		if err := p.start(i, 0); err != nil {
			return err
		}
	}
	return nil
}

// name returns the name of worker i's current generation.
func (p *processes) name(i int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.procs[i].name
}

// pause stops worker i (SIGSTOP) for d, as a GC pause or a VM freeze
// would, and returns its name.
func (p *processes) pause(i int, d time.Duration) string {
	p.mu.Lock()
	pr := p.procs[i]
	p.mu.Unlock()
	if pr.cmd.Process.Signal(syscall.SIGSTOP) != nil {
		return pr.name
	}
	time.Sleep(d)
	pr.cmd.Process.Signal(syscall.SIGCONT)
	return pr.name
}

// kill SIGKILLs worker i and starts its next generation after restart; it
// returns the killed one's name and when it was surely dead (every event it
// logged is earlier).
func (p *processes) kill(i int, restart time.Duration) (string, int64) {
	p.mu.Lock()
	pr := p.procs[i]
	pr.cmd.Process.Signal(syscall.SIGCONT) // in case a pause lane has it stopped
	pr.cmd.Process.Kill()
	<-pr.exited
	dead := now()
	p.mu.Unlock()
	time.Sleep(restart)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		p.start(i, pr.gen+1)
	}
	return pr.name, dead
}

// stopAll asks every worker to finish (SIGTERM: release and exit), and
// kills those that have not within grace.
func (p *processes) stopAll(grace time.Duration) {
	p.mu.Lock()
	p.stopped = true
	procs := append([]*proc(nil), p.procs...)
	p.mu.Unlock()
	for _, pr := range procs {
		pr.cmd.Process.Signal(syscall.SIGCONT)
		pr.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(grace)
	for _, pr := range procs {
		select {
		case <-pr.exited:
		case <-deadline:
			pr.cmd.Process.Kill()
			<-pr.exited
		}
	}
}

// logFiles returns every worker log written.
func (p *processes) logFiles() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.logs...)
}
