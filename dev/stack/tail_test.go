package stack

import (
	"slices"
	"strings"
	"testing"
)

func TestTheLauncherSaysWhichS3EventWentNowhere(t *testing.T) {
	var said []string
	out := &tail{max: 64, say: func(line string) { said = append(said, line) }}
	for _, part := range []string{
		"Traceback (most recent call last):\n  File \"x\"\nmotoserver: S3 ev",
		"ent Object Created of s3://b/'k' not sent to rule r: KeyError: 'x'\nmotoserver: S3 event Object Deleted",
		" of s3://b/'j' not sent to rule r: KeyError: 'y'\n" + strings.Repeat("noise", 40),
	} {
		if _, err := out.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		"motoserver: S3 event Object Created of s3://b/'k' not sent to rule r: KeyError: 'x'",
		"motoserver: S3 event Object Deleted of s3://b/'j' not sent to rule r: KeyError: 'y'",
	}
	if !slices.Equal(said, want) {
		t.Errorf("said %q, want %q", said, want)
	}
	if len(out.String()) > 64 {
		t.Errorf("kept %d bytes, want the last 64", len(out.String()))
	}
}
