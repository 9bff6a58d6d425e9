package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/fleetops/fleet/shared/inventory"
)

// progress says how far the execution is: one line per step of
// ReportStateMachine (plan, the parts, finish). On a terminal the line of
// the step running is rewritten in place as its invocations end; elsewhere
// each step's line is written once, when the step ends.
type progress struct {
	mu    sync.Mutex
	out   io.Writer
	tty   bool
	began time.Time

	step       string // the step running
	stepBegan  time.Time
	open       bool // a line of the terminal is being rewritten
	parts      int  // the report's parts, once planned
	partsDone  int
	retried    int // invocations of the step that failed, to be retried
	plan       inventory.Result
	applied    inventory.Result // the parts' and finish's sums
	finishDone bool
	stop       chan struct{} // closed by close
}

func newProgress(out io.Writer, tty bool) *progress {
	p := &progress{out: out, tty: tty, began: time.Now(), stop: make(chan struct{})}
	if tty {
		// A step's line shows its time, which goes on between invocations
		// (the plan step is one, of seconds).
		go func() {
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-p.stop:
					return
				case <-tick.C:
					p.mu.Lock()
					p.show()
					p.mu.Unlock()
				}
			}
		}()
	}
	return p
}

// stepOf names the step a payload of ReportStateMachine is.
func stepOf(payload json.RawMessage) string {
	var in struct {
		Step string `json:"step"`
	}
	json.Unmarshal(payload, &in)
	return in.Step
}

// start is told that an invocation of step begins.
func (p *progress) start(step string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if step == p.step {
		return
	}
	p.endLine()
	p.step, p.stepBegan, p.retried = step, time.Now(), 0
	p.show()
}

// done is told what an invocation of step answered.
func (p *progress) done(step string, response json.RawMessage) {
	var res inventory.Result
	json.Unmarshal(response, &res)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch step {
	case inventory.StepPlan:
		p.plan = res
		if res.Split != nil {
			p.parts = res.Parts
		}
	case inventory.StepApplyPart:
		p.partsDone++
		p.add(res)
	case inventory.StepFinish:
		p.finishDone = true
		p.add(res)
	}
	p.show()
	if step == inventory.StepPlan || step == inventory.StepFinish || p.parts > 0 && p.partsDone == p.parts {
		p.endLine()
	}
}

func (p *progress) add(res inventory.Result) {
	p.applied.Machines += res.Machines
	p.applied.Changed += res.Changed
	p.applied.Absent += res.Absent
	p.applied.Failed += res.Failed
	p.applied.Superseded = p.applied.Superseded || res.Superseded
}

// failed is told that an invocation failed; ReportStateMachine's Retry
// may run it again.
func (p *progress) failed() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.retried++
	p.show()
}

// show writes the line of the step running: on a terminal, in place of the
// one before.
func (p *progress) show() {
	if !p.tty || p.step == "" {
		return
	}
	fmt.Fprintf(p.out, "\r\033[K%s", p.line())
	p.open = true
}

// endLine ends the line of the step that ran: on a terminal, by leaving it
// there, elsewhere by writing it.
func (p *progress) endLine() {
	switch {
	case p.step == "":
	case p.tty && p.open:
		fmt.Fprintln(p.out)
	case !p.tty:
		fmt.Fprintln(p.out, p.line())
	}
	p.open = false
	p.step = ""
}

// close ends the line being written.
func (p *progress) close() {
	close(p.stop)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLine()
}

func (p *progress) line() string {
	took := time.Since(p.stepBegan).Round(100 * time.Millisecond)
	var b strings.Builder
	switch p.step {
	case inventory.StepPlan:
		fmt.Fprintf(&b, "report: plan: ")
		if p.plan.Machines == 0 && p.plan.Split == nil && p.plan.Changed == 0 {
			b.WriteString("reading the report and the fleet")
		} else {
			fmt.Fprintf(&b, "%d machines read, %d invalid, %d absent, %d to change", p.plan.Machines, p.plan.Invalid, p.plan.Absent, p.plan.Changed)
			if p.parts > 0 {
				fmt.Fprintf(&b, ", in %d parts", p.parts)
			}
		}
	case inventory.StepApplyPart:
		fmt.Fprintf(&b, "report: parts: %d of %d applied, %d machines", p.partsDone, p.parts, p.applied.Changed-p.applied.Absent)
	case inventory.StepFinish:
		fmt.Fprintf(&b, "report: finish: ")
		switch {
		case !p.finishDone:
			b.WriteString("applying the absences")
		case p.applied.Superseded:
			b.WriteString("a newer report has started: absences not applied")
		default:
			fmt.Fprintf(&b, "%d absent", p.applied.Absent)
		}
	default:
		fmt.Fprintf(&b, "report: %s", p.step)
	}
	if p.retried > 0 {
		fmt.Fprintf(&b, " (%d invocations retried)", p.retried)
	}
	fmt.Fprintf(&b, " (%s)", took)
	return b.String()
}

// summary says what the parts applied so far, for a run that ends early.
func (p *progress) summary() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.parts == 0 {
		return time.Since(p.began).Round(time.Second).String()
	}
	return fmt.Sprintf("%s, %d of %d parts applied (%d machines)", time.Since(p.began).Round(time.Second), p.partsDone, p.parts, p.applied.Changed-p.applied.Absent)
}
