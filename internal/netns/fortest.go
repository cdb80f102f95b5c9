package netns

import (
	"errors"
	"testing"
)

// ForTest is New for a test: it skips the test, saying why, where the machine cannot make
// network namespaces (not root, no ip command, a kernel or container that refuses), fails it
// on any other error, and removes the network when the test ends, whether it passed or not.
// Register it before starting the processes that run in the hosts, so that their cleanups
// (which stop them) run first.
func ForTest(tb testing.TB, names ...string) *Net {
	tb.Helper()
	n, err := New(names...)
	if errors.Is(err, ErrUnavailable) {
		tb.Skipf("needs network namespaces: %v", err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := n.Close(); err != nil {
			tb.Errorf("removing the network namespaces: %v", err)
		}
	})
	return n
}
