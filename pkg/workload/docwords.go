package workload

// Word lists and templates for generated documents and questions. Changing
// any list changes every generated workload for every seed, so treat them as
// part of the workload's definition: append-only edits still change the
// draws, and a change belongs in the release notes.

// codenames open every generated title. Documents pick them without
// replacement (a seeded permutation), so up to len(codenames) documents
// differ from their first title token.
var codenames = []string{
	"Halcyon", "Meridian", "Tamarack", "Obsidian", "Larkspur", "Quillon", "Saffron", "Borealis",
	"Cinder", "Juniper", "Kestrel", "Lodestar", "Marigold", "Nimbus", "Orchard", "Peregrine",
	"Quarry", "Riverbend", "Sequoia", "Thistle", "Umber", "Vantage", "Willow", "Yarrow",
	"Zephyr", "Alder", "Beacon", "Cobalt", "Driftwood", "Ember", "Foxglove", "Granite",
	"Heron", "Indigo", "Jasper", "Kelp", "Lantern", "Mistral", "Nettle", "Onyx",
	"Pinnacle", "Quartz", "Rosemary", "Sandpiper", "Tundra", "Upland", "Verbena", "Wren",
	"Aspen", "Bramble", "Cascade", "Dune", "Estuary", "Fennel", "Glacier", "Harbor",
	"Ironwood", "Jetty", "Kingfisher", "Lichen", "Monsoon", "Nautilus", "Oriole", "Prairie",
}

var systemsNames = []string{
	"Ingest Pipeline", "Billing Platform", "Search Cluster", "Payments Gateway", "Telemetry Service",
	"Inventory System", "Recommendation Engine", "Identity Service", "Data Warehouse", "Edge Cache",
	"Scheduling Service", "Notification Hub", "Model Serving Fleet", "Feature Store", "Order Router",
}

var reportKinds = []string{
	"Quarterly Reliability Review", "Capacity Planning Report", "Post-Incident Analysis",
	"Architecture Assessment", "Migration Readiness Report", "Performance Evaluation",
	"Cost and Efficiency Study", "Operational Health Report", "Design Review Summary",
	"Annual Technical Audit",
}

var sectionNames = []string{
	"Executive Summary", "Background", "Scope and Method", "System Architecture", "Traffic Profile",
	"Latency Analysis", "Throughput and Saturation", "Failure Modes", "Incident Timeline",
	"Capacity Forecast", "Cost Breakdown", "Dependency Review", "Data Quality", "Security Posture",
	"Operational Practices", "Open Risks", "Recommendations", "Rollout Plan", "Lessons Learned",
	"Appendix: Measurement Notes",
}

var components = []string{
	"write-ahead log", "request router", "connection pool", "shard coordinator", "retry queue",
	"admission controller", "metadata store", "load balancer", "batch scheduler", "cache tier",
	"replication stream", "rate limiter", "schema registry", "compaction job", "health checker",
	"message broker", "token bucket", "config service", "storage backend", "autoscaler",
	"circuit breaker", "leader election", "audit trail", "index builder", "query planner",
}

var metrics = []string{
	"p99 latency", "error rate", "throughput", "queue depth", "cache hit rate", "CPU utilisation",
	"memory headroom", "replication lag", "tail latency", "request volume", "disk saturation",
	"retry rate", "cold-start time", "availability", "cost per request",
}

var teams = []string{
	"platform", "storage", "networking", "data engineering", "site reliability", "payments",
	"security", "observability", "infrastructure", "release engineering", "capacity", "database",
}

var verbsPast = []string{
	"reduced", "doubled", "stabilised", "degraded", "masked", "exposed", "improved", "shifted",
	"limited", "amplified", "tracked", "underestimated", "absorbed", "delayed", "increased",
	"constrained", "smoothed", "isolated", "throttled", "rebalanced",
}

var movements = []string{"rose", "fell", "grew", "dropped", "shrank", "climbed", "improved", "slipped"}

var periods = []string{
	"the first quarter", "the holiday peak", "the March migration", "the load test in week six",
	"the regional failover drill", "the last two release cycles", "the overnight batch window",
	"the pilot rollout", "the eight weeks under review", "the September incident",
}

var reasons = []string{
	"the retry budget was shared across tenants", "hot keys concentrated on two shards",
	"the default timeout was longer than the client deadline", "garbage collection pauses grew with heap size",
	"the autoscaler reacted to averages instead of peaks", "a single region carried most of the writes",
	"cache entries expired at the same moment", "the dashboards sampled once per minute",
	"batch jobs competed with interactive traffic", "connection limits were set per host rather than per pool",
	"the schema change locked a busy table", "alerts fired only after the error budget was spent",
	"traffic from mobile clients arrived in bursts", "the dependency had no load-shedding policy",
}

var goals = []string{
	"keep latency within the service-level objective", "cut the monthly infrastructure bill",
	"shorten recovery after a regional outage", "remove the last manual step from deployments",
	"support twice the current peak traffic", "make capacity forecasts auditable",
	"reduce the number of pages sent to on-call engineers", "retire the legacy storage cluster",
	"give product teams self-service quotas", "catch regressions before they reach production",
}

var connectives = []string{
	"In practice", "As a result", "By contrast", "More importantly", "At the same time",
	"Over the review period", "In most regions", "According to the on-call logs", "Taken together",
	"For comparison", "Notably", "Despite this",
}

var adjectives = []string{
	"modest", "sharp", "gradual", "unexpected", "sustained", "measurable", "brief", "significant",
	"uneven", "persistent",
}

// sentenceTemplates are filled by fillSentence; each placeholder names a
// list above ({n} is a number, {pct} a percentage, {ms} milliseconds).
var sentenceTemplates = []string{
	"During {period}, the {component} handled about {n} requests per second with a {metric} of {ms} ms.",
	"The {team} team {verbed} the {component} to {goal}.",
	"{Connective}, the {metric} {moved} by {pct} percent once the {component} was reconfigured.",
	"This matters because {reason}.",
	"We observed a {adjective} change in {metric} after the {component} was moved to dedicated hosts.",
	"{Connective}, {reason}, which {verbed} the {metric} during {period}.",
	"The {component} accounts for roughly {pct} percent of the total {metric} budget.",
	"A follow-up experiment {verbed} the {metric}, but only while the {component} stayed below {pct} percent load.",
	"Owners in the {team} group argued that the {component} should be redesigned to {goal}.",
	"Measurements taken over {period} show a {adjective} rise in {metric} at {n} concurrent sessions.",
	"{Connective}, no single change explains the result; the {component} and the {component2} interact.",
	"The proposal is to {goal} by replacing the {component} with a simpler design.",
	"Engineers traced {n} alerts back to the {component}, most of them during {period}.",
	"The {metric} stayed flat even though traffic {moved} by {pct} percent.",
	"We recommend that the {team} team review how the {component} reports its {metric}.",
	"Without the {component2}, the {component} would have {verbed} the {metric} further.",
}

var firstQuestions = []string{
	"Can you summarize the main findings of \"{title}\" in five bullet points?",
	"What does the section \"{section}\" conclude, and what evidence does it give?",
	"I have a review meeting about this report tomorrow. What are the three biggest risks it identifies?",
	"Which numbers in this document should I pay most attention to, and why?",
	"Explain the role of the {term} in this report to someone new to the team.",
	"What problem is this report trying to solve, in two or three sentences?",
	"List every recommendation in the document and who is expected to act on it.",
	"Does the report give a clear root cause for the issues it describes? Quote the relevant part.",
	"What changed between the situation in \"{section}\" and the rest of the report?",
	"Give me a one-paragraph executive summary of this document for a non-technical audience.",
	"Which team does this report put most of the follow-up work on, and what is that work?",
	"Are there any claims in this document that are not backed by a measurement?",
}

var followUps = []string{
	"How does that relate to what the \"{section}\" section says?",
	"Can you give me the specific numbers mentioned in \"{section}\"?",
	"What would you recommend the {team} team do first?",
	"Explain that more simply, as if to a new engineer.",
	"Are there contradictions between \"{section}\" and \"{section2}\"?",
	"Draft a short email to my manager summarizing this discussion.",
	"Which of the recommendations would be cheapest to implement?",
	"What does the report say about the {term}?",
	"Is there anything in \"{section}\" that weakens your previous answer?",
	"Turn your last answer into a checklist.",
	"What questions should I ask the authors of \"{title}\"?",
	"Which risk would you tackle first, and why?",
	"How confident should I be in the measurements behind that?",
	"Summarize \"{section2}\" in three sentences.",
	"What assumptions does the report make about traffic growth?",
	"If we only had one engineer for a month, what should they work on?",
	"Can you compare the {term} with the rest of the system described here?",
	"What is missing from this report that you would expect to see?",
	"Rewrite your previous answer as a table.",
	"Which parts of \"{section}\" are most relevant to the {team} team?",
	"What would happen if we did nothing?",
	"Give me a timeline for the rollout based on the document.",
	"Is the {term} a single point of failure according to the report?",
	"Which metric in the report best shows progress, and why?",
	"Can you point me to the exact sentences that support that?",
	"How would you present this to leadership in two minutes?",
	"What does \"{section2}\" add that the earlier sections did not?",
	"Are the cost figures in the report consistent with each other?",
	"What should we monitor after making these changes?",
	"Play devil's advocate: what is the strongest argument against the main recommendation?",
	"Which findings are specific to {title} and which apply to other systems?",
	"What follow-up experiment would settle the open question?",
	"Shorten that to a single sentence.",
	"Who should own the {term} going forward, based on the report?",
	"What happened during the period described in \"{section}\"?",
	"List the three most important dates or periods mentioned in the document.",
}

// docSystemPrompt is the system prompt of every generated document chat: the
// instructions a document-chat app sends, shared by all conversations, so it
// is the first level of the prefix tree a cache-aware router can exploit.
const docSystemPrompt = "You are a careful technical assistant. The user shares a document between <document> tags and asks questions about it. " +
	"Answer from the document, name the sections you rely on, and say plainly when the document does not contain the answer. Keep answers concise."
