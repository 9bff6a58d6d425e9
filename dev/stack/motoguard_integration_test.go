//go:build integration

package stack

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The launcher (dev/motoserver.py) patches moto's internals, so it runs only
// the pinned moto, and only while every function it patches keeps the shape
// the patch expects. These tests start it through StartMoto, the way every
// test and make run does, on a moto that is not the one it was written for.
// Every other test that starts the launcher shows that the pinned moto passes.
func TestStartMotoRefusesAMotoItWasNotWrittenFor(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	pinned := pinnedMotoVersion(t)

	tests := []struct {
		name string
		// prelude is Python run before the launcher, in the same process.
		prelude string
		// fakeVersion, when set, is the version a moto distribution listed
		// first on the Python path declares.
		fakeVersion string
		want        []string
		notWant     []string
	}{
		{
			name:        "another version is refused with one line: what was found, what is needed, how to install it",
			fakeVersion: "9.9.9",
			want:        []string{"found moto 9.9.9, needs moto " + pinned, "pip install -r dev/moto-requirements.txt"},
			notWant:     []string{"Traceback", "\n"},
		},
		{
			// One start for six misfits: each start imports moto, seconds of CPU.
			name: "patched functions whose parameters changed, that are gone or that no longer copy tables are refused, naming each patch and no other",
			prelude: `from moto.sqs.models import Queue
del Queue.wait_for_messages
def delete_message(self, receipt_handle, batch=False):
    pass
Queue.delete_message = delete_message
import moto.backends as backends
backends.list_of_moto_modules = lambda: ("dynamodb", "s3")
import moto.dynamodb.models as m, copy as c
m.copy = type(c)("copy")
from moto.events.utils import EventTemplateParser
EventTemplateParser.parse = staticmethod(lambda input_template, input_paths_map, event, cache=None: event)
from moto.sqs.models import Message
Message.visible = property(lambda self: True)
`,
			want: []string{
				"the patch long_polls_outside does not fit moto " + pinned + ": it expects Queue.wait_for_messages(self, timeout) (AttributeError",
				"the patch event_hold does not fit moto " + pinned + ": it expects Queue.add_message(self, message), Queue.delete_message(self, receipt_handle)",
				"the patch modules_listed_once does not fit moto " + pinned,
				"the patch item_rollback does not fit moto " + pinned,
				"the patch input_paths_parsed_once does not fit moto " + pinned,
				"the patch queues_read_cheaply does not fit moto " + pinned,
				"Upgrading moto",
			},
			notWant: []string{"serialized", "plain_item_pages", "s3_event_sequencers", "Traceback"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.fakeVersion != "" {
				info := filepath.Join(dir, "moto-"+tt.fakeVersion+".dist-info")
				writeFile(t, filepath.Join(info, "METADATA"), "Metadata-Version: 2.1\nName: moto\nVersion: "+tt.fakeVersion+"\n")
			}
			prelude := tt.prelude + "import runpy, sys\nsys.argv = sys.argv[1:]\nrunpy.run_path(sys.argv[0], run_name='__main__')\n"
			writeFile(t, filepath.Join(dir, "prelude.py"), prelude)
			wrapper := filepath.Join(dir, "python")
			writeFile(t, wrapper, "#!/bin/sh\nPYTHONPATH='"+dir+"' exec '"+python+"' '"+filepath.Join(dir, "prelude.py")+"' \"$@\"\n")
			if err := os.Chmod(wrapper, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Setenv("MOTO_PYTHON", wrapper)

			ctx, cancel := context.WithTimeout(context.Background(), 2*MotoStartTimeout)
			defer cancel()
			m, err := StartMoto(ctx, "127.0.0.1:0")
			if err == nil {
				_ = m.Stop()
				t.Fatalf("StartMoto started the launcher on %s, want a refusal", m.Endpoint)
			}
			// The launcher's own words are what follows the exit status.
			_, said, _ := strings.Cut(err.Error(), "): ")
			for _, w := range tt.want {
				if !strings.Contains(said, w) {
					t.Errorf("refusal %q does not say %q", said, w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(said, w) {
					t.Errorf("refusal %q says %q", said, w)
				}
			}
		})
	}

}

// pinnedMotoVersion is the version dev/moto-requirements.txt pins.
func pinnedMotoVersion(t *testing.T) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "dev", "moto-requirements.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "moto[server]=="); ok {
			return v
		}
	}
	t.Fatal("dev/moto-requirements.txt pins no moto[server]==X")
	return ""
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
