"""Registers the built-in kinds of agent under test."""

from intellagent import hookimpl


@hookimpl
def register_agents(register):
    from intellagent_plugins.agents.a2a_agent import A2AAgent
    from intellagent_plugins.agents.agents import HttpAgent, OpenAIToolsAgent, PythonAgent

    register("openai-tools", OpenAIToolsAgent)
    register("http", HttpAgent)
    register("python", PythonAgent)
    register("a2a", A2AAgent)
