package views

import (
	"fmt"
	"strconv"
	"time"

	"github.com/wdc-dev/wdc/cmd/internal/jsonplan"
	"github.com/wdc-dev/wdc/engine/apply"
	"github.com/wdc-dev/wdc/engine/coordinator"
)

// Apply is how `wdc apply` reports: the plan, each event, the summary.
// ApplyText writes it for people, ApplyJSON as NDJSON for machines.
type Apply interface {
	// Plan shows the plan before anything runs; color is for the text
	// plan (PlanText).
	Plan(doc *jsonplan.Plan, color bool) error
	// Start begins live progress (after confirmation).
	Start()
	// Event reports one event; safe to call from several goroutines.
	Event(e coordinator.Event)
	// Close ends live progress.
	Close()
	// Summary reports the outcome; nothingToDo when the plan had no
	// changes.
	Summary(res *apply.Result, nothingToDo bool) error
}

var (
	_ Apply = (*ApplyText)(nil)
	_ Apply = (*ApplyJSON)(nil)
)

// nothingToDoText is the summary of an apply whose plan had no changes.
const nothingToDoText = "Apply complete! Nothing to do."

// applySummary is the final line: tasks by outcome, attempts, workers and
// wall time.
func applySummary(r *apply.Result) string {
	head := "Apply complete!"
	switch {
	case r.Interrupted:
		head = "Apply interrupted!"
	case !r.OK():
		head = "Apply failed!"
	}
	s := fmt.Sprintf("%s Tasks: %d succeeded, %d failed, %d cancelled", head, r.Succeeded, r.Failed, r.Cancelled)
	if r.Unfinished > 0 {
		s += fmt.Sprintf(", %d unfinished (the next apply continues them)", r.Unfinished)
	}
	workers := strconv.Itoa(r.Workers)
	if r.Joined > 0 {
		workers += fmt.Sprintf(" (%d joined)", r.Joined)
	}
	return s + fmt.Sprintf(". Attempts: %d. Workers: %s. Wall time: %s.", r.Attempts, workers, r.Wall.Round(time.Millisecond))
}
