// Package kubeswitch switches the routing mode of serving stacks that run in
// Kubernetes, for fleetbench sweeps. It owns the Kubernetes side of a switch
// (patch, rollout, wait for Ready) and imports nothing of fleetbench's but
// pkg/sweep; whether the model is served is the readiness gate's question,
// not its. It adds four switch kinds to pkg/sweep (call Register once from
// main):
//
//   - dynamo: sets an environment variable (DYN_ROUTER_MODE by default) of
//     one service (Frontend by default) of an NVIDIA Dynamo
//     DynamoGraphDeployment (nvidia.com/v1alpha1), found by its name in
//     spec.services and by the variable's name in the service's envs and
//     extraPodSpec.mainContainer.env, never by list position. It then waits
//     for the operator's rollout until every pod of the service is Ready with
//     the new value in its spec, and the DGD's Ready condition is True.
//   - kubeai: sets spec.loadBalancing.strategy of a kubeai Model
//     (kubeai.org/v1) to PrefixHash or LeastLoad and waits until
//     status.replicas.ready reaches the desired replicas.
//   - patch: applies a merge, strategic or JSON patch, templated with
//     {mode}, to any namespaced object by group, version and resource; then
//     optionally restarts a Deployment the way `kubectl rollout restart`
//     does and waits for its rollout as `kubectl rollout status` does.
//   - kubernetes: another name for patch.
//
// Each switch implements sweep.ModeReader, so the sweep runner restores the
// mode the stack had before the sweep. A switch waits for Kubernetes to
// report the stack up; whether the model is served is the readiness gate's
// question, which the runner asks after every switch.
//
// # Options
//
// Settings come from the switch's options map (all values are strings).
// Every kind takes:
//
//	namespace      namespace of the object (default: the kubeconfig context's,
//	               or the pod's own when running in a cluster)
//	kubeconfig     kubeconfig file (default: $KUBECONFIG, ~/.kube/config, else
//	               the in-cluster configuration)
//	context        kubeconfig context (default: the current one)
//	in_cluster     "true" to use the pod's ServiceAccount whatever else is set
//	timeout        bound on one switch, e.g. 20m (default 15m for dynamo, 10m
//	               otherwise; the switch's own timeout field works too)
//	poll_interval  how often to look while waiting (default 2s)
//	values         MODE=VALUE pairs mapping sweep modes to the stack's names,
//	               e.g. "kv=kv,round_robin=round-robin"; a mode not listed is
//	               used as it is, and Current maps values back
//
// dynamo:
//
//	name             DynamoGraphDeployment name (required)
//	service          service under spec.services (default Frontend)
//	env              variable to set (default DYN_ROUTER_MODE)
//	values           default "kv=kv,round_robin=round-robin"
//	selector         pod selector of a service; {name} and {service} are
//	                 replaced (default: the operator's labels,
//	                 nvidia.com/dynamo-graph-deployment-name={name},
//	                 nvidia.com/dynamo-component={service})
//	restart          "changed" (default): rely on the operator's rollout when
//	                 the value changed; "always": also delete the service's
//	                 pods when it was already set (restart_frontend: true in
//	                 the switch does the same)
//	restart_workers  "true" to delete the worker pods too, for a cold KV cache
//	                 (restart_workers: true in the switch does the same)
//	workers          worker services to restart, comma-separated (default:
//	                 every other service whose componentType is not
//	                 frontend, planner or epp)
//	ready_condition  DGD condition to wait for (default Ready)
//
// kubeai:
//
//	name             Model name (required)
//	values           default "kv=PrefixHash,round_robin=LeastLoad"
//	restart_workers  "true" to delete the Model's server pods too
//	selector         their selector; {name} is replaced (default model={name})
//
// patch and kubernetes:
//
//	group, version, resource  the object's resource (default group "" (core),
//	                          version v1; resource, the plural, required)
//	name                      the object (required)
//	patch                     the patch, JSON or YAML; {mode} is replaced by
//	                          the mode's value (required)
//	patch_type                merge (default), strategic or json
//	current                   field path of the value Current reads, e.g.
//	                          spec.template.spec.containers[name=router].env[name=MODE].value
//	restart_deployment        Deployment to rollout-restart after the patch
//	wait_deployment           Deployment whose rollout to wait for (default:
//	                          restart_deployment, or the patched object when it
//	                          is an apps/v1 Deployment)
//
// The ServiceAccount the coordinator runs as needs get and patch on the
// objects it switches, list and delete on pods, and get on Deployments; the
// Role in deploy/base grants exactly that for DGDs, Models and Deployments.
package kubeswitch
