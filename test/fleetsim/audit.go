package fleetsim

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"time"
)

// Write is one write by Courier that a kube-apiserver's audit log recorded.
type Write struct {
	Verb, Resource, Namespace, Name string
	// As is the impersonated user when Courier wrote as a ServiceAccount,
	// else Courier's own user.
	As string
	// Code is the response status (a 409 conflict, say, was tried and not
	// carried out).
	Code int
	// Time is when the kube-apiserver completed the request.
	Time time.Time
	// Received is when the kube-apiserver received it.
	Received time.Time
	// UserAgent names the writer: courier/<replica> with sharded delivery.
	UserAgent string
}

// Accepted reports whether the kube-apiserver carried the write out.
func (w Write) Accepted() bool { return w.Code < 300 }

// String is "verb resource ns/name as user".
func (w Write) String() string {
	return w.Verb + " " + w.Resource + " " + w.Namespace + "/" + w.Name + " as " + w.As
}

// CourierWrites reads Courier's writes (user agent "courier...") from the
// audit log at path, which records every write at Metadata level.
func CourierWrites(path string) ([]Write, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Write
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		var ev struct {
			Stage          string    `json:"stage"`
			Verb           string    `json:"verb"`
			UserAgent      string    `json:"userAgent"`
			StageTimestamp time.Time `json:"stageTimestamp"`
			Received       time.Time `json:"requestReceivedTimestamp"`
			ObjectRef      struct {
				Resource, Namespace, Name string
			} `json:"objectRef"`
			User struct {
				Username string `json:"username"`
			} `json:"user"`
			ResponseStatus struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
			ImpersonatedUser *struct {
				Username string `json:"username"`
			} `json:"impersonatedUser"`
		}
		if json.Unmarshal(s.Bytes(), &ev) != nil || ev.Stage != "ResponseComplete" || !strings.HasPrefix(ev.UserAgent, "courier") {
			continue
		}
		switch ev.Verb {
		case "create", "update", "patch", "delete", "deletecollection":
			as := ev.User.Username
			if ev.ImpersonatedUser != nil {
				as = ev.ImpersonatedUser.Username
			}
			out = append(out, Write{Verb: ev.Verb, Resource: ev.ObjectRef.Resource, Namespace: ev.ObjectRef.Namespace,
				Name: ev.ObjectRef.Name, As: as, Code: ev.ResponseStatus.Code, Time: ev.StageTimestamp,
				Received: ev.Received, UserAgent: ev.UserAgent})
		}
	}
	return out, s.Err()
}
