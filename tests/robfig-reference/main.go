// Command robfig-reference prints what robfig/cron v3 says about cron expressions, for the
// differential test in tests/robfig_differential.rs.
//
// Input, one case per line: "<expression>\t<start as Unix nanoseconds>".
// Output, one line per case: "ERR\t<message>", or "OK" followed by up to N fire times as
// Unix seconds ("ZERO" when robfig gives up), tab-separated.
// With -bench, it instead times Schedule.Next per expression and prints "<expr>\t<ns/op>".
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

var parser = cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

func parse(expr string) (sched cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return parser.Parse(expr)
}

func main() {
	count := flag.Int("n", 5, "fire times per case")
	bench := flag.Bool("bench", false, "time Next per expression instead")
	flag.Parse()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		expr, startText, _ := strings.Cut(in.Text(), "\t")
		nanos, err := strconv.ParseInt(startText, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bad start %q\n", startText)
			os.Exit(2)
		}
		start := time.Unix(0, nanos).UTC()
		sched, err := parse(expr)
		if *bench {
			if err != nil {
				fmt.Fprintf(os.Stderr, "cannot bench %q: %v\n", expr, err)
				os.Exit(2)
			}
			fmt.Fprintf(out, "%s\t%.1f\n", expr, nsPerNext(sched, start))
			continue
		}
		if err != nil {
			fmt.Fprintf(out, "ERR\t%s\n", strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		fields := []string{"OK"}
		t := start
		for i := 0; i < *count; i++ {
			t = sched.Next(t)
			if t.IsZero() {
				fields = append(fields, "ZERO")
				break
			}
			fields = append(fields, strconv.FormatInt(t.Unix(), 10))
		}
		fmt.Fprintln(out, strings.Join(fields, "\t"))
	}
}

// sink keeps the benchmark's results alive.
var sink int64

// nsPerNext measures one Next call from a fixed start, the way the Rust benchmark does: the
// results' Unix seconds are summed, so each call is used.
func nsPerNext(sched cron.Schedule, start time.Time) float64 {
	rounds := 1000
	for {
		begin := time.Now()
		var sum int64
		for i := 0; i < rounds; i++ {
			sum += sched.Next(start).Unix()
		}
		elapsed := time.Since(begin)
		sink += sum
		if elapsed > 300*time.Millisecond {
			return float64(elapsed.Nanoseconds()) / float64(rounds)
		}
		rounds *= 4
	}
}
