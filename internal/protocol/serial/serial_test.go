package serial

import (
	"strings"
	"testing"
)

func TestOptionValues(t *testing.T) {
	for _, tc := range []struct {
		opts    map[string]string
		wantErr string
	}{
		{opts: map[string]string{}},
		{opts: map[string]string{"idle-timeout": "250ms", "mutant": "no-lock"}},
		{opts: map[string]string{"idle-timeout": "0s"}, wantErr: "positive"},
		{opts: map[string]string{"idle-timeout": "-1s"}, wantErr: "idle-timeout"},
		{opts: map[string]string{"idle-timeout": "soon"}, wantErr: "idle-timeout"},
		// A timer this far out overflows the node's clock; every duration option has the same bound.
		{opts: map[string]string{"idle-timeout": "2000000h"}, wantErr: "1000h"},
		{opts: map[string]string{"mutant": "no-wait"}, wantErr: "no-lock"},
		{opts: map[string]string{"resend-after": "20ms"}},
		// Zero would forward every unanswered request again without pause.
		{opts: map[string]string{"resend-after": "0s"}, wantErr: "resend-after"},
		{opts: map[string]string{"resend-after": "-1ms"}, wantErr: "resend-after"},
	} {
		err := proto{}.CheckOptionValues(tc.opts)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%v: unexpected error %v", tc.opts, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%v: error %v, want one naming %q", tc.opts, err, tc.wantErr)
		case err != nil && strings.Contains(err.Error(), "\n"):
			t.Errorf("%v: error is not one line: %q", tc.opts, err)
		}
	}
}
