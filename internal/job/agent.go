package job

// handToAgent decides whether a job amdrun was asked to run itself goes
// to torch's own elastic agent instead: an elastic --nnodes MIN:MAX, or
// a c10d/etcd rendezvous on several nodes. amdrun writes no rendezvous
// protocol of its own (issue 23): it chooses and leases the devices,
// then runs `python -m torch.distributed.run` of the workers'
// interpreter with them, and one line says so. It reports whether it
// switched o to the agent.
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
