package stack

import "testing"

func TestEventPatternIsTheTemplatesWithTheLogBuckets(t *testing.T) {
	tpl, err := LoadTemplate("../../" + TemplateFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tpl.EventPattern(IndexerFunction, "LogObjects")
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"detail":{"bucket":{"name":["task-logs"]}},"detail-type":["Object Created","Object Deleted"],"source":["aws.s3"]}`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
