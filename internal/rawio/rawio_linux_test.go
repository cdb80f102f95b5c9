package rawio

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pair returns the two ends of a loopback TCP connection, both wrapped.
func pair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	c, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		t.Fatal("accept failed")
	}
	client, server = Wrap(c), Wrap(s)
	t.Cleanup(func() { client.Close(); server.Close() })
	if !Raw(client) || !Raw(server) {
		t.Fatalf("Wrap(%T) = %T, want *Conn", c, client)
	}
	return client, server
}

// TestRoundTrip sends more than the sockets buffer (writes wait for the poller and are
// partial) in both directions at once, and checks every byte.
func TestRoundTrip(t *testing.T) {
	for _, size := range []int{1, 4096, 8 << 20} {
		a, b := pair(t)
		out := map[net.Conn][]byte{a: make([]byte, size), b: make([]byte, size)}
		for _, buf := range out {
			rand.Read(buf)
		}
		errs := make(chan error, 4)
		got := map[net.Conn][]byte{}
		done := make(chan struct{}, 2)
		for _, ends := range [][2]net.Conn{{a, b}, {b, a}} {
			from, to := ends[0], ends[1]
			go func() {
				n, err := from.Write(out[from])
				if err == nil && n != size {
					err = io.ErrShortWrite
				}
				errs <- err
			}()
			buf := make([]byte, size)
			got[to] = buf
			go func() {
				_, err := io.ReadFull(to, buf)
				errs <- err
				done <- struct{}{}
			}()
		}
		for range 4 {
			if err := <-errs; err != nil {
				t.Fatalf("size %d: %v", size, err)
			}
		}
		if !bytes.Equal(got[b], out[a]) || !bytes.Equal(got[a], out[b]) {
			t.Fatalf("size %d: the bytes read differ from those written", size)
		}
	}
}

// TestEnds: deadlines, the other end closing, this end closing and a reset each end a Read
// or Write with the error the net package gives.
func TestEnds(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, a, b net.Conn) error // returns what a's operation gave
		want  func(error) bool
	}{
		{"read deadline", func(t *testing.T, a, b net.Conn) error {
			a.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			_, err := a.Read(make([]byte, 8))
			return err
		}, func(err error) bool {
			var ne net.Error
			return errors.Is(err, os.ErrDeadlineExceeded) && errors.As(err, &ne) && ne.Timeout()
		}},
		{"write deadline with a full buffer", func(t *testing.T, a, b net.Conn) error {
			a.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
			_, err := a.Write(make([]byte, 64<<20)) // nobody reads
			return err
		}, func(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }},
		{"other end closed after writing", func(t *testing.T, a, b net.Conn) error {
			if _, err := b.Write([]byte("last")); err != nil {
				t.Fatal(err)
			}
			b.Close()
			got, err := io.ReadAll(a)
			if string(got) != "last" {
				t.Fatalf("read %q before the end, want %q", got, "last")
			}
			if err != nil {
				return err
			}
			_, err = a.Read(make([]byte, 8))
			return err
		}, func(err error) bool { return err == io.EOF }},
		{"this end closed", func(t *testing.T, a, b net.Conn) error {
			a.Close()
			_, err := a.Read(make([]byte, 8))
			return err
		}, func(err error) bool { return errors.Is(err, net.ErrClosed) }},
		{"closed while reading", func(t *testing.T, a, b net.Conn) error {
			time.AfterFunc(20*time.Millisecond, func() { a.Close() })
			_, err := a.Read(make([]byte, 8))
			return err
		}, func(err error) bool { return errors.Is(err, net.ErrClosed) }},
		{"other end reset", func(t *testing.T, a, b net.Conn) error {
			b.(*Conn).Conn.(*net.TCPConn).SetLinger(0) // close with a reset
			b.Close()
			var err error
			for i := 0; i < 100 && err == nil; i++ { // the reset arrives after a write or two
				_, err = a.Write([]byte("x"))
				time.Sleep(time.Millisecond)
			}
			return err
		}, func(err error) bool { return errors.Is(err, syscallReset) || errors.Is(err, syscallPipe) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := pair(t)
			if err := c.setup(t, a, b); !c.want(err) {
				t.Fatalf("got %v (%T)", err, err)
			}
		})
	}
}

// TestNothingGoesAround: a Conn has no method that would move bytes without its Read and
// Write (io.Copy uses ReadFrom and WriteTo when they are there).
func TestNothingGoesAround(t *testing.T) {
	a, _ := pair(t)
	if _, ok := a.(io.ReaderFrom); ok {
		t.Error("a Conn is an io.ReaderFrom")
	}
	if _, ok := a.(io.WriterTo); ok {
		t.Error("a Conn is an io.WriterTo")
	}
}

// TestBlockingDescriptor: a descriptor made blocking (File does that) must not make a read
// wait inside a raw call, where it would hold its P and no GC could stop the world. The
// read and the GC run in a child process, so that a hang fails this test instead of
// freezing it.
func TestBlockingDescriptor(t *testing.T) {
	if os.Getenv("RAWIO_BLOCKING_CHILD") == "1" {
		a, _ := pair(t)
		f, err := a.(*Conn).Conn.(*net.TCPConn).File()
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		f.Fd() // the descriptor is blocking from here on
		go a.Read(make([]byte, 8))
		time.Sleep(50 * time.Millisecond)
		runtime.GC()
		fmt.Println("GC done")
		// Exit at once: under -race the reads are package syscall's, which on a blocking
		// descriptor wait in the kernel (without holding a P), as the net package's do, and
		// closing the connection would wait for them.
		os.Exit(0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestBlockingDescriptor$", "-test.count=1")
	cmd.Env = append(os.Environ(), "RAWIO_BLOCKING_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "GC done") {
		t.Fatalf("the child (a read on a blocking descriptor, then a GC): %v\n%s", err, out)
	}
}

// TestHappensBefore: what a goroutine did before writing to a connection happens before what
// the reader does after reading it, as with the net package (this fails under -race
// without the syscall package's annotations).
func TestHappensBefore(t *testing.T) {
	a, b := pair(t)
	shared := 0
	go func() {
		shared++
		a.Write([]byte{1})
	}()
	if _, err := b.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	shared++
	if shared != 2 {
		t.Fatalf("shared = %d", shared)
	}
}

// TestWrapLeavesOtherConns: only TCP connections are wrapped.
func TestWrapLeavesOtherConns(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := Wrap(a); got != a {
		t.Fatalf("Wrap(net.Pipe end) = %T, want it unchanged", got)
	}
}

var syscallReset, syscallPipe error = unix.ECONNRESET, unix.EPIPE
