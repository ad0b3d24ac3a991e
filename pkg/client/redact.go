package client

import "net/url"

// RedactURL returns raw without its user info, query and fragment, any of
// which may carry a credential (a password, ?api-key=...), for logs, errors
// and reports. It returns "" for "" and "(unparsable URL)" when raw does not
// parse. It is a pure function, safe for concurrent use.
func RedactURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}
