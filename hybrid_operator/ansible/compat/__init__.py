"""Everything we borrow from the private internals of ansible-core and ansible-runner.

Where it sits (a module here per area):

- the zygote (``zygote``) resets Ansible's process-wide state in every fork and warms up without the RPC
  host (``state``);
- the in-worker module path (``inworker``) hooks four private ``ActionBase`` methods and
  ``module_common._find_module_utils`` (``modules``);
- the in-process task path (``inline``) replaces the strategies' ``WorkerProcess``, runs ``TaskExecutor``
  itself and hands results to the strategy (``tasks``);
- the lean path (``warm.lean``) runs API modules in the run's own process as their AnsiballZ wrapper would
  in a new one (``apimodules``) and counts each task by its path (``lean``);
- the template cache (``warm.templates``) serves ``AnsibleEnvironment``'s compiles from code objects kept
  across runs (``templates``) and tells the filter and test loaders which of Jinja's own names
  ``ansible.builtin`` has no plugin of (``jinjaplugins``);
- the parsed-file cache (``warm.parsed``) answers ``DataLoader.load_from_file``'s role loading (``loading``),
  and the loaded-play cache (``warm.plays``) ``Playbook.load`` itself (``plays``);
- the plugin-docs memo (``warm.plugindocs``) skips ``PluginLoader._load_config_defs`` for plugins whose
  documentation declares no options (``plugindocs``);
- the local temp dirs (``warm.tmpdirs``) mirror ``ActionBase._make_tmp_path`` and ``_remove_tmp_path``
  (``tmpdirs``);
- shared copies (``warm.copies``) give the tagged scalars a ``__deepcopy__`` (``datatag``);
- the zygote answers ``get_vars``' cleaning of a host's facts when it has none (``facts``), hands each
  run the ``ansible-playbook`` parser it built once (``cliparser``), leaves a host's fact cache file as it
  is where a ``set_fact`` saves it unchanged (``factcache``) and gives ``lookup('template')`` a new dict
  over the variables where it deep-copied them (``templatelookup``);
- the executor side (``warm``) asks ansible-runner's ``RunnerConfig`` what to run and reads the output back
  through its ``OutputEventFilter`` (``runner``), the events' data from one stream the run's display
  callback writes (``events``).

No other module of the package names a private attribute of either library.

The rules for each touchpoint: its expected shape is written down here, per ansible-core minor where
the minors differ (``SUPPORTED`` is the tested range, the same as pyproject's); its shape is checked
before it is used (``private_state_problems``, ``module_hook_problems``, ``runner_problems``); and when
the shape is not the one expected, the warm path steps aside for Ansible's normal one (a module takes the
real interpreter, a run takes ansible-runner) with one log line, never a failed run. The executor's
start-up self-test (``selftest``) then compares a forked run against the zygote's plain warm-up run.
"""

from hybrid_operator.ansible.compat.apimodules import WrapperCall, in_process_problems, run_here, wrapper_call
from hybrid_operator.ansible.compat.cliparser import cli_parser_problems, share_cli_parser
from hybrid_operator.ansible.compat.datatag import datatag_problems, share_tagged_scalars
from hybrid_operator.ansible.compat.factcache import skip_unchanged_fact_writes, unchanged_fact_write_problems
from hybrid_operator.ansible.compat.facts import no_facts_problems, skip_cleaning_no_facts
from hybrid_operator.ansible.compat.jinjaplugins import find_missing, hook_jinja_lookups, jinja_lookup_problems
from hybrid_operator.ansible.compat.lean import hook_lean_tasks, lean_task_problems
from hybrid_operator.ansible.compat.loading import ParsedFiles, hook_parsed_files, loader_hook_problems, parse_ahead
from hybrid_operator.ansible.compat.modules import (
    InProcess,
    ModulePolicy,
    hook_modules,
    module_fqn,
    module_hook_problems,
    module_preload,
    runs_this_interpreter,
    to_module_side,
)
from hybrid_operator.ansible.compat.names import decoder_keys, template_keywords
from hybrid_operator.ansible.compat.plays import Preloaded, hook_preloaded, preload, preload_problems
from hybrid_operator.ansible.compat.plugindocs import hook_plugin_docs, plugin_docs_problems
from hybrid_operator.ansible.compat.rpchost import defer_rpc_host, start_rpc_host
from hybrid_operator.ansible.compat.runner import RunnerCommand, replay_output, runner_command, runner_problems
from hybrid_operator.ansible.compat.stackwalk import stack_walk_problems, walk_stack_lazily
from hybrid_operator.ansible.compat.state import (
    PRIVATE_STATE,
    PrivateState,
    fresh_event_contexts,
    no_rpc_host,
    note_event_callbacks,
    private_state_problems,
    quiet_debug_calls,
    reset_private_state,
    run_playbook,
    stream_event_partials,
    use_local_tmp,
)
from hybrid_operator.ansible.compat.tasks import (
    hook_inline_tasks,
    inline_task_problems,
    run_task_inline,
    warm_result_mappings,
)
from hybrid_operator.ansible.compat.templatelookup import copy_template_variables_shallow, template_lookup_problems
from hybrid_operator.ansible.compat.templates import CodeCache, hook_template_cache, precompile, template_cache_problems
from hybrid_operator.ansible.compat.tmpdirs import hook_tmpdirs, tmpdir_hook_problems
from hybrid_operator.ansible.compat.versions import (
    FINDER_WARNING,
    SUPPORTED,
    UNTESTED_ENV,
    UnsupportedAnsible,
    ansible_version,
    check_version,
)

__all__ = [
    "FINDER_WARNING",
    "PRIVATE_STATE",
    "SUPPORTED",
    "UNTESTED_ENV",
    "CodeCache",
    "InProcess",
    "ModulePolicy",
    "ParsedFiles",
    "Preloaded",
    "PrivateState",
    "RunnerCommand",
    "UnsupportedAnsible",
    "WrapperCall",
    "ansible_version",
    "check_version",
    "cli_parser_problems",
    "copy_template_variables_shallow",
    "datatag_problems",
    "decoder_keys",
    "defer_rpc_host",
    "find_missing",
    "fresh_event_contexts",
    "hook_inline_tasks",
    "hook_jinja_lookups",
    "hook_lean_tasks",
    "hook_modules",
    "hook_parsed_files",
    "hook_plugin_docs",
    "hook_preloaded",
    "hook_template_cache",
    "hook_tmpdirs",
    "in_process_problems",
    "inline_task_problems",
    "jinja_lookup_problems",
    "lean_task_problems",
    "loader_hook_problems",
    "module_fqn",
    "module_hook_problems",
    "module_preload",
    "no_facts_problems",
    "no_rpc_host",
    "note_event_callbacks",
    "parse_ahead",
    "plugin_docs_problems",
    "precompile",
    "preload",
    "preload_problems",
    "private_state_problems",
    "quiet_debug_calls",
    "replay_output",
    "reset_private_state",
    "run_here",
    "run_playbook",
    "run_task_inline",
    "runner_command",
    "runner_problems",
    "runs_this_interpreter",
    "share_cli_parser",
    "share_tagged_scalars",
    "skip_cleaning_no_facts",
    "skip_unchanged_fact_writes",
    "stack_walk_problems",
    "start_rpc_host",
    "stream_event_partials",
    "template_cache_problems",
    "template_keywords",
    "template_lookup_problems",
    "tmpdir_hook_problems",
    "to_module_side",
    "unchanged_fact_write_problems",
    "use_local_tmp",
    "walk_stack_lazily",
    "warm_result_mappings",
    "wrapper_call",
]
