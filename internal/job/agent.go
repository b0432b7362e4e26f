package job

// handToAgent switches o to torch's elastic agent, with one line, for an
// elastic --nnodes MIN:MAX or a c10d/etcd rendezvous on several nodes:
// amdrun writes no rendezvous of its own (issue 23).
func (o *Options) handToAgent(rdzv map[string]string) bool {
	backend := rdzv["backend"]
	static := backend == "" || backend == "static"
	if o.ElasticNNodes == "" && (static || o.NNodes <= 1) {
		return false
	}
	o.Launcher, o.Agent = "torchrun", true
	what := "--nnodes " + o.ElasticNNodes
	if o.ElasticNNodes == "" {
		what = "--rdzv-backend " + backend + " on several nodes"
	}
	o.Warn.Warn("%s: amdrun chooses and leases this node's devices, torch's elastic agent (python -m torch.distributed.run) runs the rendezvous and restarts; each worker is bound as amdrun plans it (amdrun's bind shim picks its CPUs by LOCAL_RANK)", what)
	return true
}
