//go:build !unix

package lambdarun

import "os"

func maxRSS(*os.ProcessState) int64 { return 0 }
