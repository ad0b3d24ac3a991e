// Package kubejob runs a coordinator's agents as one Kubernetes Indexed Job
// and watches them. It owns the Job and what happens to its pods; it imports
// no other fleetbench package, runs no load and reads no results. It must
// not put the shared token in a log or an Event: pods read it from a Secret.
//
// Build turns a Config into the Job: completions = parallelism = the agent
// count, podReplacementPolicy Failed, a per-index backoff limit, a pod
// failure policy (a usage error fails the Job, a disruption does not count),
// pods that learn their index from the downward API and dial the
// coordinator's Service with the shared token from a Secret, spread over
// nodes, with a wide local port range.
//
// A Manager creates the Job (owned by the coordinator's pod when
// Config.Owner is set), watches its pods with informers and reports what
// happens on Events: Running and Succeeded, agent losses (Failed,
// OOMKilled, Deleted) within seconds, and fatal conditions (image pull
// failure, a missing Secret, a pod Pending longer than PendingTimeout, the
// Job failed) also as an *Error from Err and Wait, so a run never hangs on
// agents that will not come. Delete removes the Job and its pods; so does
// the end of the context given to Manager.Start.
//
// Options are a command's settings for all this, bound to flags by
// AddFlags. Start runs the agents from them for one run: it connects to
// the API server (in-cluster, or $KUBECONFIG), starts a Manager, reports
// agents lost for good on Agents.Losses and cancels the run's context on
// a fatal condition (see Cause); Agents.Stop deletes the Job.
//
// The Manager needs, in the Job's namespace: jobs create, get, list, watch,
// delete; pods get, list, watch.
package kubejob
