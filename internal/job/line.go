package job

import "strings"

// CommandLine is the launch command line as given, one Arg per flag that
// Resolve reads, by field (a flag renamed here fails to compile where it
// is read). Flags that only bind a setting have none.
type CommandLine struct {
	NGPUs, NProcPerNode, DryRun, Module, NoPython               Arg
	Python, Bind, Grace, MaxRestarts, NoPrefix, LogDir          Arg
	RestartWait, StallTimeout                                   Arg
	LocalRanksFilter, NNodes, NodeRank, MasterAddr, MasterPort  Arg
	Wait, Launcher, RdzvBackend, RdzvEndpoint, RdzvID, RdzvConf Arg
	// torchrun's own flags (addTorchrunFlags).
	Standalone, Role, VirtualLocalRank, RunPath, Redirects, Tee    Arg
	ShutdownTimeout, NUMABinding, SignalsToHandle, MonitorInterval Arg
	StartMethod, EventLogHandler, LocalAddr, LogsSpecs             Arg
	DuplicateStdoutFilters, DuplicateStderrFilters                 Arg

	args []*Arg // as declared
}

// Declare makes a the Arg named name of the typed value v (its default
// v's text now), torchrun's as t says: one row of l's table. help is
// the flag's help (AgentOnly: why it does nothing under amdrun).
func (l *CommandLine) Declare(a *Arg, name string, v Value, t Torch, help string) *Arg {
	a.name, a.v, a.torch, a.help, a.def = name, v, t, help, v.String()
	l.args = append(l.args, a)
	return a
}

// Torch says how a flag is torchrun's, as a set: not at all (Own), by
// name (an ambiguous abbreviation means it), by its PET_<NAME> variable
// too; passed on to torchrun as given (Pass) unless torch's agent runs
// the job (NotToAgent); only torch's agent uses it (AgentOnly: under
// amdrun a value other than its default gets one line, unless Quiet).
type Torch uint8

const (
	Own       Torch = 0
	TorchName Torch = 1 << iota
	TorchPET
	Pass
	NotToAgent
	AgentOnly
	Quiet
)

// Value is a flag's typed value, as pflag.Value.
type Value interface {
	String() string
	Set(string) error
	Type() string
}

// Arg is one flag of the command line: its typed value, whether it was
// given, and how errors name it. It is itself the Value the command
// declares as the flag.
type Arg struct {
	v                     Value
	name, from, help, def string
	given                 bool
	torch                 Torch
}

// String is the flag's value as text ("" for an undeclared Arg).
func (a *Arg) String() string {
	if a.v == nil {
		return ""
	}
	return a.v.String()
}

// Set sets the flag from s.
func (a *Arg) Set(s string) error {
	if err := a.v.Set(s); err != nil {
		return err
	}
	a.given = true
	return nil
}

// Type is pflag's name of the value's type.
func (a *Arg) Type() string { return a.v.Type() }

// Name is the flag's name, without "--".
func (a *Arg) Name() string { return a.name }

// Torch says how the flag is torchrun's.
func (a *Arg) Torch() Torch { return a.torch }

// Given says the flag was given, on the command line or by PET_*.
func (a *Arg) Given() bool { return a.given }

// From records that the flag's value came from the variable pet.
func (a *Arg) From(pet string) { a.from = pet }

// Label names the flag as the user gave it: --flag or its PET_* variable.
func (a *Arg) Label() string {
	if a.from != "" {
		return a.from
	}
	return "--" + a.name
}

// On says a switch is set.
func (a *Arg) On() bool { return a.String() == "true" }

// PETVar is the variable torchrun reads for the flag ("" for none).
func (a *Arg) PETVar() string {
	if a.torch&TorchPET == 0 {
		return ""
	}
	return "PET_" + strings.ToUpper(strings.ReplaceAll(a.name, "-", "_"))
}

// torchrunFlag is the flag in the underscore spelling of every torchrun.
func (a *Arg) torchrunFlag() string { return "--" + strings.ReplaceAll(a.name, "-", "_") }
