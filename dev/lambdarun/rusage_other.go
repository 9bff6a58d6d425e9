//go:build !unix

package lambdarun

import "os"

func peakMemory(int) int64 { return 0 }

func maxRSS(*os.ProcessState) int64 { return 0 }
