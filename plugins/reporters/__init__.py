"""Registers the built-in reporters: html (one self-contained file), json, csv."""

from intellagent import hookimpl


@hookimpl
def register_reporters(register):
    from intellagent_plugins.reporters.writers import CsvReporter, HtmlReporter, JsonReporter

    for reporter in (HtmlReporter, JsonReporter, CsvReporter):
        register(reporter)
