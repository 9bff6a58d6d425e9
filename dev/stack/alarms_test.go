package stack

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fleetops/fleet/shared/metrics"
)

// alarmMetric is one metric an alarm reads, as the template names it.
type alarmMetric struct {
	namespace, name string
	dimensions      map[string]any // name → value (a string or an intrinsic)
}

// alarmMetrics returns the metrics an alarm's properties read: its own
// Namespace/MetricName, or the MetricStat of each entry of Metrics.
func alarmMetrics(props map[string]any) []alarmMetric {
	read := func(m map[string]any) alarmMetric {
		am := alarmMetric{namespace: stringOf(m["Namespace"]), name: stringOf(m["MetricName"]), dimensions: map[string]any{}}
		for _, d := range asList(m["Dimensions"]) {
			dm := mapOf(d)
			am.dimensions[stringOf(dm["Name"])] = dm["Value"]
		}
		return am
	}
	if _, ok := props["MetricName"]; ok {
		return []alarmMetric{read(props)}
	}
	var out []alarmMetric
	for _, q := range asList(props["Metrics"]) {
		if stat := mapOf(mapOf(q)["MetricStat"]); stat != nil {
			out = append(out, read(mapOf(stat["Metric"])))
		}
	}
	return out
}

// The alarms on the service's own metrics must read what the functions
// write (shared/metrics): an alarm on a misspelt metric or dimension sits in
// OK forever.
func TestRepoTemplateAlarmsReadTheMetricsTheFunctionsWrite(t *testing.T) {
	tpl := loadRepoTemplate(t)
	emitted := []string{metrics.ColdStarts, metrics.ServerErrors, metrics.BackendThrottles, metrics.StateChanges,
		metrics.LogLookups, metrics.LogObjects, metrics.S3Calls, metrics.ExpiryApplied, metrics.ExpirySkipped, metrics.ExpiryDropped,
		metrics.ExpirySuperseded, metrics.ExpiryDeferred, metrics.ExpiryFailed, metrics.ExpiryRemaining, metrics.ExpiryLag, metrics.LossesHeld, metrics.ReportsTooLarge, metrics.MissingLogBuckets,
		metrics.ListedLogBuckets, metrics.ReconcileAdded, metrics.ReconcileRemoved, metrics.ReconcileUpdated}
	functions := tpl.Functions()
	var alarms []string
	for id, r := range tpl.Resources {
		if r.Type != "AWS::CloudWatch::Alarm" {
			continue
		}
		alarms = append(alarms, id)
		ms := alarmMetrics(r.Properties)
		if len(ms) == 0 {
			t.Errorf("%s: got no metric, want one", id)
		}
		for _, m := range ms {
			if m.namespace != metrics.DefaultNamespace {
				continue
			}
			if !slices.Contains(emitted, m.name) {
				t.Errorf("%s: got metric %s, which no function writes (want one of %v)", id, m.name, emitted)
			}
			fn, ok := mapOf(m.dimensions["Function"])["Ref"].(string)
			if len(m.dimensions) != 1 || !ok || !slices.Contains(functions, fn) {
				t.Errorf("%s: got dimensions %v, want only Function, the !Ref of a function (its name)", id, m.dimensions)
			}
		}
		for _, actions := range []string{"AlarmActions", "OKActions"} {
			if got, want := r.Properties[actions], []any{map[string]any{"Ref": "AlarmTopic"}}; !reflect.DeepEqual(got, want) {
				t.Errorf("%s: got %s %v, want [!Ref AlarmTopic]", id, actions, got)
			}
		}
	}
	slices.Sort(alarms)
	want := []string{"ApiServerErrorsAlarm", "BackendThrottlesAlarm", "ExpiryErrorsAlarm", "ExpiryFailedRecordsAlarm",
		"ExpiryLagAlarm", "ExpiryStalledAlarm", "FunctionThrottlesAlarm", "IndexerDeadLetterAlarm", "IndexerErrorsAlarm", "LossesHeldAlarm",
		"MissingLogBucketsAlarm", "PublisherDeadLetterAlarm", "PublisherLagAlarm", "ReconcileDriftAlarm", "ReconcileExecutionsFailedAlarm", "ReportExecutionsFailedAlarm", "ReportsDeadLetterAlarm", "ReportsTooLargeAlarm"}
	if !slices.Equal(alarms, want) {
		t.Errorf("got alarms %v, want %v", alarms, want)
	}
}

// An alarm that sums a metric over the functions must name every function,
// or a new function's throttles go unseen.
func TestRepoTemplateThrottleAlarmsCoverEveryFunction(t *testing.T) {
	tpl := loadRepoTemplate(t)
	for _, id := range []string{"FunctionThrottlesAlarm", "BackendThrottlesAlarm"} {
		var got []string
		for _, m := range alarmMetrics(tpl.Resources[id].Properties) {
			for _, v := range m.dimensions {
				got = append(got, fmt.Sprint(mapOf(v)["Ref"]))
			}
		}
		slices.Sort(got)
		want := tpl.Functions()
		if id == "BackendThrottlesAlarm" { // the console and the publisher call no table or bucket
			want = slices.DeleteFunc(want, func(fn string) bool { return fn == "ConsoleFunction" || fn == "PublisherFunction" })
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: got functions %s, want %s", id, strings.Join(got, ","), strings.Join(want, ","))
		}
	}
}
