"""Executors: the program-counter machine over a vm program, and the stackless executor."""

from abir.vm.machine import DEFAULT_MAX_STACK_DEPTH, Machine, compile_machine

__all__ = ["DEFAULT_MAX_STACK_DEPTH", "Machine", "compile_machine"]
