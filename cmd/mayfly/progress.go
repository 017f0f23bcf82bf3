package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// isTerminal reports whether w is a terminal (a bar drawn elsewhere would
// only litter a log file).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// newBar is a progress bar on w up to max (-1: unknown, a spinner),
// with its own description.
// predict adds the bar's own estimate of the time left; throttle bounds how
// often it redraws.
func newBar(w io.Writer, max int64, desc string, bytes, predict bool, throttle time.Duration) *progressbar.ProgressBar {
	return progressbar.NewOptions64(max,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowBytes(bytes),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(predict),
		progressbar.OptionThrottle(throttle),
		// No spinner goroutine: our own ticker redraws.
		progressbar.OptionSetSpinnerChangeInterval(0),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionUseANSICodes(true),
	)
}

// loadProgress draws `mayfly load`'s bar: the input bytes read (of the
// file's size, so the bar can tell the time left), with the documents
// loaded and their rate in the description.
type loadProgress struct {
	bar  *progressbar.ProgressBar
	stop chan struct{}
	done chan struct{}
}

func newLoadProgress(w io.Writer, total int64, read *countingReader, t *loadTally, start time.Time) *loadProgress {
	p := &loadProgress{bar: newBar(w, total, "loading", true, true, 100*time.Millisecond), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			loaded, failed := t.loaded.Load(), t.failed.Load()
			desc := fmt.Sprintf("%d docs, %s docs/s", loaded, humanRate(loaded, time.Since(start))) // wall clock: load rate
			if failed > 0 {
				desc += fmt.Sprintf(", %d failed", failed)
			}
			p.bar.Describe(desc)
			_ = p.bar.Set64(read.n.Load())
		}
	}()
	return p
}

// finish stops the redrawing and clears the bar.
func (p *loadProgress) finish() {
	close(p.stop)
	<-p.done
	_ = p.bar.Finish()
	_ = p.bar.Clear()
}
