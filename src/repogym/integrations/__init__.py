"""Integrations with other runtimes: ``repogym.integrations.harbor`` is a Harbor environment
(``harbor run -e repogym.integrations.harbor:RepogymEnvironment``). Importing this package
imports none of them; each needs its runtime installed (Harbor: ``pip install harbor``)."""
