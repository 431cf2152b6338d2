package troubleshoot

// rows is the troubleshooting table of the downstreamcopies rows, by phase,
// in the order docs/troubleshooting.md shows it.
var rows = []Phase{
	{
		Phase: "Unreachable",
		Intro: "The cluster could not be reached, or its kubeconfig cannot be used. Every row of that cluster shows the same message; other clusters are not affected. Courier retries with backoff (at most 2 minutes apart).",
		Entries: []Entry{
			{
				Message: "`cluster <cluster> has no spec.kubeConfigSecret`",
				Cause:   "the Fleet Cluster names no kubeconfig Secret",
				Fix:     "set `spec.kubeConfigSecret` (Fleet does when it registers the cluster)",
			},
			{
				Message: "`kubeconfig Secret <ns>/<name> of cluster <cluster> does not exist`",
				Cause:   "the Secret named by `spec.kubeConfigSecret` (in `spec.kubeConfigSecretNamespace`, else the Cluster's namespace) is missing",
				Fix:     "create it; Courier picks it up without a restart",
			},
			{
				Message: "`kubeconfig Secret <ns>/<name> of cluster <cluster> is not read: spec.kubeConfigSecretNamespace \"<ns>\" is not allowed; ...`",
				Cause:   "like Fleet since v0.16, Courier reads a kubeconfig Secret only from the Cluster's own namespace, `fleet-local`, `fleet-default`, `cattle-fleet-system`, `cattle-fleet-clusters-system` or a namespace starting with `cluster-`: otherwise whoever may edit a Cluster could point Courier at another tenant's credentials",
				Fix:     "move the Secret into one of those namespaces and change `spec.kubeConfigSecretNamespace`",
			},
			{
				Message: "`kubeconfig Secret <ns>/<name> has no key \"value\"`",
				Cause:   "the kubeconfig must be under the key `value` (Fleet's convention)",
				Fix:     "rename the key",
			},
			{
				Message: "`kubeconfig in Secret <ns>/<name> is invalid: <error>`",
				Cause:   "it does not parse or does not make a client config (credentials in the error are redacted)",
				Fix:     "fix the kubeconfig",
			},
			{
				Message: "`kubeconfig in Secret <ns>/<name> is refused: it uses <what>, which would make Courier run a command or read a file of its own; embed the credentials instead`",
				Cause:   "`<what>` is `an exec credential plugin`, `an auth-provider plugin`, `tokenFile`, `client-certificate or client-key file paths` or `a certificate-authority file path`: a kubeconfig from a Secret must not make Courier execute programs or read its own files",
				Fix:     "embed the credentials: `token`, `client-certificate-data`/`client-key-data`, `certificate-authority-data`",
			},
			{
				Message: "`reading kubeconfig Secret <ns>/<name> of cluster <cluster>: <error>`",
				Cause:   "the upstream API refused or failed the read, e.g. `forbidden`",
				Fix:     "Courier's ClusterRole needs get on secrets ([rbac.md](rbac.md))",
			},
			{
				Message: "`cluster <cluster> is unreachable: <doing>: <error>`",
				Cause:   "a network error, timeout or 503 while `<doing>` (e.g. `creating Secret <ns>/<name> as ServiceAccount <ns>/<sa>`)",
				Fix:     "check the kubeconfig's server address and the network from Courier's pods; `courier_cluster_reachable{cluster}` is 0 meanwhile",
			},
			{
				Message: "`cluster <cluster> is unreachable: <error>`",
				Cause:   "the same, for the rows not yet handled when the cluster stopped answering",
				Fix:     "as above",
			},
			{
				Message: "`cluster <cluster> is unreachable: <doing>: Unauthorized`",
				Cause:   "the cluster rejects the kubeconfig's credentials (401): an expired or revoked token, a client certificate of another CA",
				Fix:     "renew the credentials in the kubeconfig Secret",
			},
		},
	},
	{
		Phase: "Forbidden",
		Intro: "Nothing of that HelmOp was written in that cluster. Courier retries on its own until the permission is granted; no restart needed.",
		Entries: []Entry{
			{
				Message: "`cluster <cluster>: forbidden: ServiceAccount <agent-ns>/<sa> may not create secrets in namespace <ns>, create the missing namespace <ns>; nothing was written`",
				// The documented message is an example of the list of missing rights.
				Match: `forbidden: ServiceAccount \S+ may not .*; nothing was written`,
				Cause: "Courier checked the ServiceAccount's rights (SelfSubjectAccessReview as that ServiceAccount) before writing; the list names each missing `<verb> <resource> in namespace <ns>`",
				Fix:   "grant the ServiceAccount those verbs in that namespace downstream, or create the namespace ([rbac.md](rbac.md#the-helmops-serviceaccount))",
			},
			{
				Message: "the same with `Courier's own identity` instead of a ServiceAccount",
				Match:   `forbidden: Courier's own identity may not .*; nothing was written`,
				Cause:   "the HelmOp names no ServiceAccount and `fleet-default` does not exist in the agent namespace, so Courier writes as itself, and the kubeconfig's identity lacks the fallback rules",
				Fix:     "apply `artifacts/downstream/rbac.yaml` downstream, or give the HelmOp a ServiceAccount",
			},
			{
				Message: "`a ServiceAccount is required (--require-service-account): the HelmOp names none and <agent-ns>/fleet-default does not exist in the cluster`",
				Cause:   "`--require-service-account` (chart: `requireServiceAccount`) forbids the fallback to Courier's identity",
				Fix:     "set `spec.serviceAccount` (or the target's), or create `fleet-default` in the agent namespace downstream",
			},
			{
				Message: "`<doing> in cluster <cluster>: <API error>` with `is forbidden`",
				Cause:   "the write itself was refused after the check passed (e.g. an admission policy, or RBAC changed in between); `<doing>` is `creating`, `updating` or `replacing immutable <Kind> <ns>/<name> as <identity>`, or `creating namespace <ns> as <identity>`",
				Fix:     "read the API error; it names the user and the verb",
			},
			{
				Message: "an impersonation error in the API error (`cannot impersonate resource \"serviceaccounts\"`)",
				Cause:   "the kubeconfig's identity may not impersonate the ServiceAccount",
				Fix:     "the `impersonate` rule of `artifacts/downstream/rbac.yaml`",
			},
		},
	},
	{
		Phase: "Conflict",
		Intro: "Courier never overwrites or deletes an object it does not own.",
		Entries: []Entry{
			{
				Message: "`<Kind> <ns>/<name> exists in cluster <cluster> and is not managed by Courier; it is left unchanged`",
				Cause:   "an object of that name exists downstream without Courier's labels",
				Fix:     "remove or rename that object (Courier then copies), or remove the entry from `downstreamResources`",
			},
			{
				Message: "`<Kind> <ns>/<name> exists in cluster <cluster> and belongs to another owner (HelmOp \"<ns>/<name>\"); it is left unchanged`",
				Cause:   "another HelmOp (or the same HelmOp from another upstream cluster) already copies an object of that name there",
				Fix:     "give one of them another destination namespace or drop one entry",
			},
			{
				Message: "`<Kind> <ns>/<name> in cluster <cluster> is Fleet's copy (BundleDeployment <bd>) and differs from its source; Courier never writes Fleet's copies`",
				Cause:   "Fleet's agent (v0.14+ behind a gate, v0.16+ always) copies `downstreamResources` itself and labels its copy `fleet.cattle.io/bundledeployment`; its type or data differ from the source (Fleet has not caught up, or someone edited it). When they are equal the row is `Synced` and its message names the BundleDeployment",
				Fix:     "let Fleet's agent update it, or look at why it does not",
			},
			{
				Message: "`<Kind> <ns>/<name> in cluster <cluster> was replaced by an object Courier does not own; it is left unchanged`",
				Cause:   "between Courier's read and its write, someone replaced its copy with their own object",
				Fix:     "as for \"not managed by Courier\"",
			},
		},
	},
	{
		Phase: "SourceMissing",
		Entries: []Entry{
			{
				Message: "`<Kind> <ns>/<name> does not exist`",
				Cause:   "the listed Secret or ConfigMap is not in the HelmOp's namespace (sources are always read from there)",
				Fix:     "create it there; it is copied as soon as it appears",
			},
			{
				Message: "`...; the copy made from resourceVersion <rv> stays in cluster <cluster>`",
				Cause:   "the source was deleted after it was copied: the copy is left in place",
				Fix:     "recreate the source, or remove the entry (the copy is then pruned unless `keepResources`)",
			},
		},
	},
	{
		Phase: "Invalid",
		Entries: []Entry{
			{
				Message: "`kind \"<kind>\" cannot be copied: only Secret and ConfigMap are supported`",
				Cause:   "the entry's kind is neither (kinds match case-insensitively)",
				Fix:     "fix the entry",
			},
			{
				Message: "`<Kind> entry has no name`",
				Cause:   "the entry has no `name`",
				Fix:     "fix the entry",
			},
		},
	},
	{
		Phase: "Pending",
		Entries: []Entry{
			{
				Message: "`<Kind> <ns>/<name> is not copied to cluster <cluster> yet`",
				Cause:   "the engine has not handled it yet; normal for a few seconds after a change",
				Fix:     "wait; if it stays, check the leader's log",
			},
			{
				Message: "`<doing> in cluster <cluster> failed: <API error>`",
				Cause:   "a downstream write failed for another reason (validation, quota, a webhook)",
				Fix:     "read the API error; Courier retries with backoff",
			},
			{
				Message: "`reading <Kind> <ns>/<name> upstream: <error>`",
				Cause:   "the upstream read of the source failed (Event reason `SourceReadFailed`)",
				Fix:     "Courier's upstream RBAC, or the upstream API's health",
			},
			{
				Message: "`<Kind> <ns>/<name> does not exist in cluster <cluster> yet; the leader writes it` / `... differs from its source; the leader updates it`",
				Cause:   "this replica does not hold the Lease and saw the copy missing or stale",
				Fix:     "nothing if it clears within seconds; if not, find the leader (`kubectl -n courier-system get lease courier`) and read its log; `Forbidden` is only known to the leader",
			},
		},
	},
	{
		Phase: "Deleting",
		Entries: []Entry{
			{
				Message: "`<Kind> <ns>/<name> in cluster <cluster> is no longer wanted; the leader removes it`",
				Cause:   "on a replica that does not lead: the copy is to be removed",
				Fix:     "nothing",
			},
			{
				Message: "`removing <Kind> <ns>/<name> from cluster <cluster> failed: <API error>`",
				Cause:   "the removal was refused or the cluster did not answer; Courier retries with backoff",
				Fix:     "the API error says which: Courier's delete right downstream (`artifacts/downstream/rbac.yaml`), or the cluster's reachability",
			},
			{
				Message: "`<Kind> <ns>/<name> in cluster <cluster> is no longer wanted and not removed yet: <error>`",
				Cause:   "an earlier removal in the same pass failed, so this one waits for the retry",
				Fix:     "fix the first one",
			},
		},
	},
	{
		Phase: "Denied",
		Entries: []Entry{
			{
				Message: "`Secret <ns>/<name> is never exported: it is the kubeconfig of Cluster <ns>/<cluster> (rule cluster-kubeconfig); nothing is written to cluster <c>, and a copy Courier made there before is removed, also one written with keepResources`",
				Cause:   "a Fleet Cluster names this Secret in `spec.kubeConfigSecret`: it holds that cluster's admin credentials",
				Fix:     "list a Secret made for the purpose instead ([security.md](security.md))",
			},
			{
				Message: "`Secret <ns>/<name> is never exported: Secrets of type <type> hold credentials or another controller's state (rule secret-type); ...`",
				Cause:   "a ServiceAccount or bootstrap token, a Helm release record, or one of Fleet's own Secrets",
				Fix:     "the same; `--deny-sensitive-exports=false` turns this and the rule above off, on purpose only",
			},
			{
				Message: "`<Kind> <ns>/<name> is never exported: it is annotated courier.dev/export: \"false\" (rule export-annotation); ...`",
				Cause:   "the source's owner marked it so",
				Fix:     "remove the annotation if it may travel, or the entry",
			},
			{
				Message: "`...; <Kind> <ns>/<name>, written with keepResources, was removed from cluster <cluster>`",
				Cause:   "the copy was made before its source became one that is never exported: keepResources keeps copies, never a leak (Warning Event `ExportRetracted`)",
				Fix:     "nothing: that is the point; list an ordinary source if the workload needs one",
			},
			{
				Message: "`...; Fleet's own agent exported it: <Kind> <ns>/<name> in cluster <cluster> is Fleet's copy (BundleDeployment <bd>); ...`",
				Cause:   "Fleet's agent copies `downstreamResources` itself, with no deny list; Courier never touches Fleet's object (Warning Event `ExportedByFleet`)",
				Fix:     "remove the entry from the HelmOp or `fleet.yaml` (Fleet then removes its copy), and install the admission policy so that it cannot come back ([security.md](security.md))",
			},
		},
	},
	{
		Phase: "Kept",
		Entries: []Entry{
			{
				Message: "`<Kind> <ns>/<name> stays in cluster <cluster>: it was written with keepResources and nothing lists it any more; Courier no longer updates it`",
				Cause:   "`keepResources` was set when the copy was written, then the entry, target or HelmOp went away",
				Fix:     "delete the copy downstream when it is no longer needed; the row goes with it",
			},
		},
	},
}
