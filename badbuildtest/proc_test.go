package badbuildtest

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proc is a program the test runs, its output (stdout and stderr) kept.
type proc struct {
	name   string
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{} // closed when it exited
}

// startProc starts bin with args, its environment the test's plus env;
// the end of the test kills it if it still runs.
func startProc(t *testing.T, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, out: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() { p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(p.kill)
	return p
}

// waitLine waits until the output has a line matching re and returns its
// submatches; it fails the test when the program exits first or after d.
func (p *proc) waitLine(t *testing.T, re *regexp.Regexp, d time.Duration) []string {
	t.Helper()
	deadline := time.After(d)
	for {
		if m := re.FindStringSubmatch(p.out.String()); m != nil {
			return m
		}
		select {
		case <-p.exited:
			if m := re.FindStringSubmatch(p.out.String()); m != nil {
				return m
			}
			t.Fatalf("%s exited (%v) before printing a line matching %s:\n%s", p.name, p.cmd.ProcessState, re, p.out)
		case <-deadline:
			t.Fatalf("%s printed no line matching %s within %s:\n%s", p.name, re, d, p.out)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kill ends the program at once (SIGKILL) and waits for it.
func (p *proc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// running reports whether the program still runs.
func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// syncBuffer is a bytes.Buffer for one writer and concurrent readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// count is the number of lines of s that contain sub.
func count(s, sub string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			n++
		}
	}
	return n
}
