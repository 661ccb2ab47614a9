"""Registers the built-in reporters: html (one self-contained file), json, csv, junit (for CI servers)."""

from intellagent import hookimpl


@hookimpl
def register_reporters(register):
    from intellagent_plugins.reporters.junit import JunitReporter
    from intellagent_plugins.reporters.writers import CsvReporter, HtmlReporter, JsonReporter

    for reporter in (HtmlReporter, JsonReporter, CsvReporter, JunitReporter):
        register(reporter)
