package logs

import "github.com/fleetops/fleet/shared/fault"

// logJSON is SchedulerStorageLog, or SchedulerStorageLogMetadata when the
// URLs are left out (openapi.yaml, the log models).
type logJSON struct {
	Key          string `json:"key"`
	LastModified int64  `json:"lastModified"`
	Size         int64  `json:"size"`
	StartTime    *int64 `json:"startTime,omitempty"`
	EndTime      *int64 `json:"endTime,omitempty"`
	GetURL       string `json:"getUrl,omitempty"`
	DownloadURL  string `json:"downloadUrl,omitempty"`
}

// tokenJSON is a ContinuationToken.
type tokenJSON struct {
	Value    *string `json:"value,omitempty"`
	LastPage bool    `json:"lastPage"`
}

// searchJSON is SchedulerStorageSearchRequest.
type searchJSON struct {
	RequestsAndDeploys map[string][]string  `json:"requestsAndDeploys"`
	TaskIDs            []string             `json:"taskIds"`
	Allowlist          []string             `json:"fileNamePrefixAllowlist"`
	Whitelist          []string             `json:"fileNamePrefixWhitelist"` // the older name, sent by older clients
	Start              *int64               `json:"start"`
	End                *int64               `json:"end"`
	ExcludeMetadata    bool                 `json:"excludeMetadata"`
	ListOnly           bool                 `json:"listOnly"`
	MaxPerPage         *int                 `json:"maxPerPage"`
	ContinuationTokens map[string]tokenJSON `json:"continuationTokens"`
}

// maxTokenValue bounds a token's value: it is an S3 key, at most 1024 bytes.
const maxTokenValue = 1024

func (s searchJSON) check() error {
	if len(s.RequestsAndDeploys) == 0 && len(s.TaskIDs) == 0 {
		return fault.Invalid("Must specify at least one request or task to search")
	}
	if n := len(s.RequestsAndDeploys) + len(s.TaskIDs); n > maxScopes {
		return fault.Invalid("A search may name at most %d tasks and requests, got %d", maxScopes, n)
	}
	if s.MaxPerPage != nil && (*s.MaxPerPage < 1 || *s.MaxPerPage > maxSearchPage) {
		return fault.Invalid("maxPerPage must be between 1 and %d, got %d", maxSearchPage, *s.MaxPerPage)
	}
	for key, t := range s.ContinuationTokens {
		if t.Value != nil && len(*t.Value) > maxTokenValue {
			return fault.Invalid("continuation token %s is not one this service gave", key)
		}
	}
	return nil
}

// allowlist returns the file name prefix allowlist; the older field name
// wins when a client sends both.
func (s searchJSON) allowlist() []string {
	if s.Whitelist != nil {
		return s.Whitelist
	}
	return s.Allowlist
}

func (s searchJSON) maxPerPage() int {
	if s.MaxPerPage == nil {
		return 10
	}
	return *s.MaxPerPage
}

// searchResultJSON is SchedulerStorageSearchResult.
type searchResultJSON struct {
	ContinuationTokens map[string]tokenJSON `json:"continuationTokens"`
	LastPage           bool                 `json:"lastPage"`
	Results            []logJSON            `json:"results"`
}
