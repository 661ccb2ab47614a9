"""The dialogue kit, shared by every pipeline in which a simulated user plays a brief against
the agent under test: :class:`~intellagent_plugins.dialogue.scenario.Scenario` (subclass it with
what your personas and critics read), the :class:`~intellagent_plugins.dialogue.dialog.Dialog`,
the ``user-agent`` simulator that plays any scenario, the ``state-check`` critic for scenarios
with ground truth, and their report views."""

from intellagent import hookimpl

INTELLAGENT_NAMESPACE = "dialogue"


@hookimpl
def register_stages(register):
    from intellagent_plugins.dialogue.simulator import UserAgent
    from intellagent_plugins.dialogue.state import StateCheck

    register(UserAgent)
    register(StateCheck)


@hookimpl
def register_views(register):
    from intellagent_plugins.dialogue.views import DialogView, ScenarioView, StateVerdictView

    register("scenario", ScenarioView)
    register("dialog", DialogView)
    register("state-verdict", StateVerdictView)
