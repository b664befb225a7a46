package node

import (
	"encoding/binary"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// BenchmarkPreHelloConn: what a connection that never says Hello costs
// the node until it does, the attack of SECURITY.md's "memory before
// authentication": it connects, announces a 1 MiB Check and sends 100
// bytes of it. Each op is one such connection, in waves of 500 held
// open together. allocs/conn, B/conn and cpu-us/conn are the process's
// per connection, less those of dialing a listener that accepts nothing
// (measured the same way first): what the node's side costs;
// close-allocs/conn is what the process allocates when they close.
func BenchmarkPreHelloConn(b *testing.B) {
	const wave = 500
	n := benchNode(b)
	head := binary.BigEndian.AppendUint32(nil, proto.DefaultMaxFrame)
	head = append(head, proto.Version, byte(proto.TypeCheck), 0, 0)
	head = binary.BigEndian.AppendUint64(head, 1)
	head = append(head, make([]byte, 100-len(head))...)

	sink, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	open := func(addr string, k int) []net.Conn {
		conns := make([]net.Conn, 0, k)
		for range k {
			c, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			c.Write(head)
			conns = append(conns, c)
		}
		return conns
	}
	base := n.conns.Open()
	settle := func(want int) {
		want += base
		deadline := time.Now().Add(30 * time.Second)
		for n.conns.Open() != want {
			if time.Now().After(deadline) {
				b.Fatalf("the node holds %d connections, want %d", n.conns.Open(), want)
			}
			time.Sleep(time.Millisecond)
		}
		// Their readers have read what was sent when the node is idle.
		time.Sleep(50 * time.Millisecond)
	}
	closeAll := func(conns []net.Conn) {
		for _, c := range conns {
			c.Close()
		}
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	c0 := cpu()
	closeAll(open(sink.Addr().String(), wave))
	dialCost := (cpu() - c0) / wave
	runtime.ReadMemStats(&ms1)
	dialAllocs := float64(ms1.Mallocs-ms0.Mallocs) / wave
	dialBytes := float64(ms1.TotalAlloc-ms0.TotalAlloc) / wave

	var used time.Duration
	var allocs, bytes, closeAllocs uint64
	b.ResetTimer()
	for done := 0; done < b.N; done += wave {
		k := min(wave, b.N-done)
		runtime.ReadMemStats(&ms0)
		c0 := cpu()
		conns := open(n.DataAddr(), k)
		settle(k)
		used += cpu() - c0
		runtime.ReadMemStats(&ms1)
		allocs += ms1.Mallocs - ms0.Mallocs
		bytes += ms1.TotalAlloc - ms0.TotalAlloc
		runtime.ReadMemStats(&ms0)
		closeAll(conns)
		settle(0)
		runtime.ReadMemStats(&ms1)
		closeAllocs += ms1.Mallocs - ms0.Mallocs
	}
	b.StopTimer()
	b.ReportMetric(float64(allocs)/float64(b.N)-dialAllocs, "allocs/conn")
	b.ReportMetric(float64(bytes)/float64(b.N)-dialBytes, "B/conn")
	b.ReportMetric(float64(closeAllocs)/float64(b.N), "close-allocs/conn")
	b.ReportMetric(float64((used-time.Duration(b.N)*dialCost).Microseconds())/float64(b.N), "cpu-us/conn")
}

// BenchmarkReconnectStorm: what 1,000 legitimate clients reconnecting at
// once cost, from the first dial to the last answer. Each op is one
// storm: 1,000 connections dialed by 50 goroutines, each sending a Ping
// as its first frame and reading the Pong, held until the last has been
// answered, then closed. ms/storm is the wall time of a storm.
func BenchmarkReconnectStorm(b *testing.B) {
	const clients, dialers = 1000, 50
	n := benchNode(b)
	ping, err := proto.AppendFrame(nil, 1, &proto.Ping{})
	if err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		conns := make(chan net.Conn, clients)
		errs := make(chan error, dialers)
		for range dialers {
			go func() {
				for range clients / dialers {
					c, err := net.DialTimeout("tcp", n.DataAddr(), 10*time.Second)
					if err == nil {
						c.SetDeadline(time.Now().Add(10 * time.Second))
						if _, err = c.Write(ping); err == nil {
							_, _, err = proto.NewReaderSize(c, 0, 64).Next()
						}
						conns <- c
					}
					if err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range dialers {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
		total += time.Since(start)
		close(conns)
		for c := range conns {
			c.Close()
		}
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/storm")
}
